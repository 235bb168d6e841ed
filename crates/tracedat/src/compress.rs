//! Decompression of trace.dat version 7 blocks: zlib (trace-cmd's "zlib",
//! RFC 1950 streams as zlib's `compress2` writes them) and zstd (trace-cmd's
//! "zstd", one or more frames), through miniz_oxide and our own zstd
//! decoder ([`crate::zstd::decompress`]). Mirrors the
//! compression framing of trace-cmd.dat.v7(5); it does not compress.

use crate::Error;

/// Largest uncompressed block accepted (trace-cmd's blocks are a section or
/// a chunk of some pages; this bounds what a corrupt size can allocate).
pub(crate) const MAX_BLOCK: u32 = 256 << 20;

/// Decompresses one block whose uncompressed size the file states.
pub(crate) fn decompress(
    algo: crate::Compression,
    input: &[u8],
    size: u32,
    offset: u64,
) -> Result<Vec<u8>, Error> {
    let name = algo.name();
    let bad = |msg: String| Error::Decompress {
        algo: name,
        offset,
        msg,
    };
    if size > MAX_BLOCK {
        return Err(bad(format!("uncompressed size {size} is implausible")));
    }
    let out = match algo {
        crate::Compression::Zlib => {
            miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(input, size as usize)
                .map_err(|e| bad(format!("{:?}", e.status).to_lowercase()))?
        }
        crate::Compression::Zstd => {
            crate::zstd::decompress(input, size as usize).map_err(|e| bad(e.to_string()))?
        }
    };
    if out.len() != size as usize {
        return Err(bad(format!(
            "decompressed to {} bytes, the header says {size}",
            out.len()
        )));
    }
    Ok(out)
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
