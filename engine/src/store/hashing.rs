//! Content addressing: the sha256 every stored object is named and checked by, and a file
//! that hashes what is written through it, for objects too big to hold in memory.

use sha2::{Digest, Sha256};

use crate::error::Result;

/// A `Write` into an anonymous temporary file that hashes and counts what passes through it:
/// objects too big to hold (a year's access file, a golden copy's partition or list state) are
/// written here and sent with [`super::CorpusStore::put_immutable_file`].
pub struct HashingFile {
    file: std::io::BufWriter<std::fs::File>,
    hasher: Sha256,
    len: u64,
}

/// A [`HashingFile`] written: the file, its length and sha256 (hex).
#[derive(Debug)]
pub struct HashedFile {
    pub file: std::fs::File,
    pub len: u64,
    pub sha256: String,
}

impl HashingFile {
    pub fn new() -> Result<Self> {
        Ok(HashingFile {
            file: std::io::BufWriter::with_capacity(1 << 20, tempfile::tempfile()?),
            hasher: Sha256::new(),
            len: 0,
        })
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.len
    }

    pub fn finish(self) -> Result<HashedFile> {
        Ok(HashedFile {
            file: self.file.into_inner().map_err(|e| e.into_error())?,
            len: self.len,
            sha256: hex::encode(self.hasher.finalize()),
        })
    }
}

impl std::io::Write for HashingFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = std::io::Write::write(&mut self.file, buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::Write::flush(&mut self.file)
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
