//! Decompression of trace.dat version 7 blocks: zlib (trace-cmd's "zlib",
//! RFC 1950 streams as zlib's `compress2` writes them) and zstd (trace-cmd's
//! "zstd", one or more frames), through miniz_oxide and our own zstd
//! decoder ([`crate::zstd::decompress`]). Mirrors the
//! compression framing of trace-cmd.dat.v7(5); it does not compress.

use crate::Error;

/// Largest uncompressed block accepted (trace-cmd's blocks are a section or
/// a chunk of some pages; this bounds what a corrupt size can allocate).
pub(crate) const MAX_BLOCK: u32 = 256 << 20;

/// One block's framing: what its errors say, and the size the file states,
/// checked before decompressing (a bound on what a corrupt size allocates)
/// and after.
struct Framing {
    name: &'static str,
    offset: u64,
    size: u32,
}

impl Framing {
    fn new(algo: crate::Compression, size: u32, offset: u64) -> Result<Framing, Error> {
        let f = Framing {
            name: algo.name(),
            offset,
            size,
        };
        if size > MAX_BLOCK {
            return Err(f.bad(format!("uncompressed size {size} is implausible")));
        }
        Ok(f)
    }

    fn bad(&self, msg: String) -> Error {
        Error::Decompress {
            algo: self.name,
            offset: self.offset,
            msg,
        }
    }

    /// The stated size against the `n` bytes decompressed.
    fn check(&self, n: usize) -> Result<(), Error> {
        if n != self.size as usize {
            return Err(self.bad(format!(
                "decompressed to {n} bytes, the header says {}",
                self.size
            )));
        }
        Ok(())
    }
}

/// Decompresses one block whose uncompressed size the file states.
pub(crate) fn decompress(
    algo: crate::Compression,
    input: &[u8],
    size: u32,
    offset: u64,
) -> Result<Vec<u8>, Error> {
    let f = Framing::new(algo, size, offset)?;
    let out = match algo {
        crate::Compression::Zlib => {
            miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(input, size as usize)
                .map_err(|e| f.bad(format!("{:?}", e.status).to_lowercase()))?
        }
        crate::Compression::Zstd => {
            crate::zstd::decompress(input, size as usize).map_err(|e| f.bad(e.to_string()))?
        }
    };
    f.check(out.len())?;
    Ok(out)
}

/// Blocks decompressed one after another (a CPU's chunks) into buffers
/// kept between them: no allocation per block.
#[derive(Default)]
pub(crate) struct Blocks {
    zstd: crate::zstd::Decompressor,
    /// The last block decompressed through zlib.
    zlib: Vec<u8>,
    /// Where the last block is: in `zlib` (true) or the zstd decoder.
    in_zlib: bool,
    /// The last block's length (0 after an error).
    len: usize,
}

impl Blocks {
    /// Decompresses one block as [`decompress`] does; the bytes stay in
    /// [`Blocks::last`] until the next call.
    pub(crate) fn decompress(
        &mut self,
        algo: crate::Compression,
        input: &[u8],
        size: u32,
        offset: u64,
    ) -> Result<(), Error> {
        self.len = 0;
        let f = Framing::new(algo, size, offset)?;
        let n = match algo {
            crate::Compression::Zlib => {
                self.zlib = decompress(algo, input, size, offset)?;
                self.in_zlib = true;
                self.zlib.len()
            }
            crate::Compression::Zstd => {
                self.in_zlib = false;
                self.zstd
                    .decompress(input, size as usize)
                    .map_err(|e| f.bad(e.to_string()))?
                    .len()
            }
        };
        f.check(n)?;
        self.len = n;
        Ok(())
    }

    /// The last block decompressed (empty before the first or after an
    /// error).
    pub(crate) fn last(&self) -> &[u8] {
        if self.len == 0 {
            &[]
        } else if self.in_zlib {
            &self.zlib[..self.len]
        } else {
            self.zstd.last(self.len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Compression;

    #[test]
    fn zlib_round_trip() {
        let data = b"hello hello hello trace.dat".repeat(50);
        let z = miniz_oxide::deflate::compress_to_vec_zlib(&data, 6);
        assert_eq!(
            decompress(Compression::Zlib, &z, data.len() as u32, 0).unwrap(),
            data
        );
        // a wrong stated size is an error, not a silent short block
        assert!(decompress(Compression::Zlib, &z, data.len() as u32 + 1, 0).is_err());
        assert!(decompress(Compression::Zlib, &z[..z.len() / 2], data.len() as u32, 0).is_err());
    }

    #[test]
    fn zstd_round_trip() {
        let data = b"zstd zstd zstd trace.dat".repeat(100);
        let z = ruzstd::encoding::compress_to_vec(
            &data[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        assert_eq!(
            decompress(Compression::Zstd, &z, data.len() as u32, 0).unwrap(),
            data
        );
        assert!(decompress(Compression::Zstd, &z, 10, 0).is_err());
        assert!(decompress(Compression::Zstd, &z[..z.len() - 3], data.len() as u32, 0).is_err());
        assert!(decompress(Compression::Zstd, b"garbage", 7, 0).is_err());
        assert!(decompress(Compression::Zstd, b"", MAX_BLOCK + 1, 0).is_err());
    }
}
