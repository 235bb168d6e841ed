//! The C types a print fmt's casts and values have: integers of C's widths
//! and signedness with the promotions and usual arithmetic conversions,
//! pointers, and the names the kernel's formats use for them (typedefs,
//! qualifiers, the structures `sizeof` meets).

/// A C integer type: width in bits and signedness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntTy {
    /// 8, 16, 32 or 64.
    pub bits: u32,
    /// Whether it is signed.
    pub signed: bool,
}

impl IntTy {
    /// `int`.
    pub const INT: IntTy = IntTy::new(32, true);
    /// `unsigned int`.
    pub const UINT: IntTy = IntTy::new(32, false);
    /// `long long`.
    pub const LLONG: IntTy = IntTy::new(64, true);
    /// `unsigned long long`.
    pub const ULLONG: IntTy = IntTy::new(64, false);
    /// `char` (signed on the kernel's x86 and arm64 builds: `-fsigned-char`
    /// is not used everywhere, but the value only matters in arithmetic).
    pub const CHAR: IntTy = IntTy::new(8, true);
    /// `unsigned char`.
    pub const UCHAR: IntTy = IntTy::new(8, false);

    /// A type of `bits` bits.
    pub const fn new(bits: u32, signed: bool) -> IntTy {
        IntTy { bits, signed }
    }

    /// The kernel's `long` (`long_size` bytes).
    pub fn long(long_size: usize) -> IntTy {
        IntTy::new(8 * long_size as u32, true)
    }

    /// The kernel's `unsigned long`.
    pub fn ulong(long_size: usize) -> IntTy {
        IntTy::new(8 * long_size as u32, false)
    }

    /// `v` cut to this type and extended back to 64 bits (sign-extended
    /// for signed types): the canonical bits of a value of this type.
    pub fn norm(self, v: u64) -> u64 {
        if self.bits >= 64 {
            return v;
        }
        let sh = 64 - self.bits;
        if self.signed {
            (((v << sh) as i64) >> sh) as u64
        } else {
            (v << sh) >> sh
        }
    }

    /// The integer promotions: types narrower than `int` become `int`.
    pub fn promote(self) -> IntTy {
        if self.bits < 32 { IntTy::INT } else { self }
    }

    /// The usual arithmetic conversions of two (promoted) operand types.
    pub fn common(a: IntTy, b: IntTy) -> IntTy {
        let (a, b) = (a.promote(), b.promote());
        if a == b {
            return a;
        }
        if a.signed == b.signed {
            return if a.bits >= b.bits { a } else { b };
        }
        let (u, s) = if a.signed { (b, a) } else { (a, b) };
        if u.bits >= s.bits { u } else { s }
    }
}

/// The type of a cast or of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CType {
    /// An integer (enums and `bool` included).
    Int(IntTy),
    /// A pointer; the element type when it is an integer (`char *`,
    /// `u32 *`), `None` for `void *` and structure pointers.
    Ptr(Option<IntTy>),
}

/// Qualifiers and annotations that do not change a type.
pub(super) const IGNORED: &[&str] = &[
    "const",
    "volatile",
    "__force",
    "__user",
    "__iomem",
    "__rcu",
    "__percpu",
    "restrict",
    "__restrict",
];

/// Typedefs of integer types met in print fmts: (name, bits, signed); a
/// `bits` of 0 means the kernel's `long`.
pub(super) const TYPEDEFS: &[(&str, u32, bool)] = &[
    ("u8", 8, false),
    ("u16", 16, false),
    ("u32", 32, false),
    ("u64", 64, false),
    ("s8", 8, true),
    ("s16", 16, true),
    ("s32", 32, true),
    ("s64", 64, true),
    ("__u8", 8, false),
    ("__u16", 16, false),
    ("__u32", 32, false),
    ("__u64", 64, false),
    ("__s8", 8, true),
    ("__s16", 16, true),
    ("__s32", 32, true),
    ("__s64", 64, true),
    ("uint8_t", 8, false),
    ("uint16_t", 16, false),
    ("uint32_t", 32, false),
    ("uint64_t", 64, false),
    ("int8_t", 8, true),
    ("int16_t", 16, true),
    ("int32_t", 32, true),
    ("int64_t", 64, true),
    ("__le16", 16, false),
    ("__le32", 32, false),
    ("__le64", 64, false),
    ("__be16", 16, false),
    ("__be32", 32, false),
    ("__be64", 64, false),
    ("bool", 8, false),
    ("_Bool", 8, false),
    ("uint", 32, false),
    ("ulong", 0, false),
    ("size_t", 0, false),
    ("ssize_t", 0, true),
    ("uintptr_t", 0, false),
    ("ptrdiff_t", 0, true),
    ("off_t", 0, true),
    ("ino_t", 0, false),
    ("pid_t", 32, true),
    ("uid_t", 32, false),
    ("gid_t", 32, false),
    ("kuid_t", 32, false),
    ("kgid_t", 32, false),
    ("dev_t", 32, false),
    ("gfp_t", 32, false),
    ("fmode_t", 32, false),
    ("umode_t", 16, false),
    ("loff_t", 64, true),
    ("sector_t", 64, false),
    ("blkcnt_t", 64, false),
    ("time64_t", 64, true),
    ("ktime_t", 64, true),
    ("clockid_t", 32, true),
    ("key_serial_t", 32, true),
    ("blk_opf_t", 32, false),
    ("blk_status_t", 8, false),
    ("__kernel_rwf_t", 32, true),
    ("netdev_features_t", 64, false),
    ("xfs_ino_t", 64, false),
    ("xfs_off_t", 64, true),
    ("xfs_daddr_t", 64, true),
    ("xfs_agnumber_t", 32, false),
    ("xfs_agblock_t", 32, false),
    ("xfs_fsblock_t", 64, false),
    ("xfs_fileoff_t", 64, false),
    ("xfs_filblks_t", 64, false),
    ("xfs_extlen_t", 32, false),
    ("xfs_fsize_t", 64, true),
    ("vm_fault_t", 32, false),
    ("irq_hw_number_t", 0, false),
    ("cputime_t", 64, false),
    ("nfs4_stateid", 0, false),
];

/// Sizes of the structures `sizeof` meets in print fmts.
pub(super) const STRUCTS: &[(&str, u64)] = &[
    ("in_addr", 4),
    ("in6_addr", 16),
    ("sockaddr", 16),
    ("sockaddr_in", 16),
    ("sockaddr_in6", 28),
    ("sockaddr_storage", 128),
];
