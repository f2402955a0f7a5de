//! Entities of a list snapshot too big to hold (a GLEIF golden copy: millions of LEIs), sorted
//! by entity through temporary files, so the comparison with the list state can merge two
//! sorted streams.
//!
//! An external sort: entries are held as compact lines up to a byte limit, then sorted and
//! written as one run to an anonymous temporary file; reading merges the runs. A snapshot that
//! fits under the limit never touches the disk. An entity given twice collapses when both
//! copies are the same and is refused otherwise (a file cannot say two things of one LEI).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufRead, BufReader, BufWriter, Seek, Write};

use serde::Deserialize;

use crate::error::{Error, Result};

/// Bytes of entry lines held before a run is written: a few hundred thousand LEI records,
/// small beside the memory the rest of an ingest may use.
pub const DEFAULT_LIMIT_BYTES: usize = 64 << 20;

/// One entity as a snapshot gives it: its fields as canonical JSON text (object keys sorted),
/// compared as text with the list state and parsed only for an entity that changed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct Seen {
    pub name: String,
    pub locator: String,
    pub fields: String,
}

/// Entries held in memory up to a limit, the rest in sorted runs on disk.
#[derive(Debug)]
pub struct EntrySpill {
    /// Names the input in errors (the snapshot's file).
    label: String,
    limit: usize,
    held: Vec<(String, String)>,
    held_bytes: usize,
    runs: Vec<std::fs::File>,
    pushed: u64,
}

impl EntrySpill {
    pub fn new(label: &str) -> Self {
        Self::with_limit(label, DEFAULT_LIMIT_BYTES)
    }

    /// A spill that writes a run once its lines reach `limit` bytes (tests use small ones).
    pub fn with_limit(label: &str, limit: usize) -> Self {
        EntrySpill {
            label: label.to_owned(),
            limit: limit.max(1),
            held: Vec::new(),
            held_bytes: 0,
            runs: Vec::new(),
            pushed: 0,
        }
    }

    /// Entries pushed so far (duplicates included).
    pub fn len(&self) -> u64 {
        self.pushed
    }

    pub fn is_empty(&self) -> bool {
        self.pushed == 0
    }

    /// Runs written to disk so far.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    pub fn push(&mut self, entity: String, seen: &Seen) -> Result<()> {
        let line = serde_json::to_string(seen).expect("strings serialize");
        self.held_bytes += entity.len() + line.len() + 48;
        self.held.push((entity, line));
        self.pushed += 1;
        if self.held_bytes >= self.limit {
            self.write_run()?;
        }
        Ok(())
    }

    fn write_run(&mut self) -> Result<()> {
        self.held.sort_unstable();
        let mut w = BufWriter::with_capacity(1 << 20, tempfile::tempfile()?);
        for (entity, line) in self.held.drain(..) {
            // One entry per line: JSON escapes every newline inside the strings, and the
            // entity is the JSON string first on the line.
            serde_json::to_writer(&mut w, &entity).expect("a string serializes");
            w.write_all(b"\t")?;
            w.write_all(line.as_bytes())?;
            w.write_all(b"\n")?;
        }
        let mut file = w.into_inner().map_err(|e| e.into_error())?;
        file.rewind()?;
        self.runs.push(file);
        self.held_bytes = 0;
        Ok(())
    }

    /// The entries in entity order, each entity once.
    pub fn into_sorted(mut self) -> Result<Sorted> {
        let source = if self.runs.is_empty() {
            self.held.sort_unstable();
            Source::Memory(std::mem::take(&mut self.held).into_iter())
        } else {
            if !self.held.is_empty() {
                self.write_run()?;
            }
            let mut readers: Vec<_> = self
                .runs
                .drain(..)
                .map(|f| BufReader::with_capacity(1 << 20, f).lines())
                .collect();
            let mut heap = BinaryHeap::new();
            for (i, r) in readers.iter_mut().enumerate() {
                if let Some(item) = read_line(&self.label, r)? {
                    heap.push(Reverse((item.0, item.1, i)));
                }
            }
            Source::Runs { readers, heap }
        };
        Ok(Sorted {
            label: self.label,
            source,
            pending: None,
        })
    }
}

type Lines = std::io::Lines<BufReader<std::fs::File>>;

fn read_line(label: &str, lines: &mut Lines) -> Result<Option<(String, String)>> {
    let Some(line) = lines.next() else {
        return Ok(None);
    };
    let line = line?;
    let corrupt = || {
        Error::from(asof_engine::Error::integrity(
            format!("sorted entries of {label}"),
            "a temporary run file is corrupt",
        ))
    };
    let (entity, rest) = line.split_once('\t').ok_or_else(corrupt)?;
    let entity: String = serde_json::from_str(entity).map_err(|_| corrupt())?;
    Ok(Some((entity, rest.to_owned())))
}

enum Source {
    Memory(std::vec::IntoIter<(String, String)>),
    Runs {
        readers: Vec<Lines>,
        heap: BinaryHeap<Reverse<(String, String, usize)>>,
    },
}

/// [`EntrySpill::into_sorted`]: entities ascending, duplicates collapsed or refused.
pub struct Sorted {
    label: String,
    source: Source,
    pending: Option<(String, String)>,
}

impl std::fmt::Debug for Sorted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sorted")
            .field("label", &self.label)
            .finish()
    }
}

impl Sorted {
    fn next_raw(&mut self) -> Result<Option<(String, String)>> {
        match &mut self.source {
            Source::Memory(it) => Ok(it.next()),
            Source::Runs { readers, heap } => {
                let Some(Reverse((entity, line, i))) = heap.pop() else {
                    return Ok(None);
                };
                if let Some((e, l)) = read_line(&self.label, &mut readers[i])? {
                    heap.push(Reverse((e, l, i)));
                }
                Ok(Some((entity, line)))
            }
        }
    }

    fn next_entry(&mut self) -> Result<Option<(String, Seen)>> {
        let Some((entity, line)) = self
            .pending
            .take()
            .map_or_else(|| self.next_raw(), |p| Ok(Some(p)))?
        else {
            return Ok(None);
        };
        // Copies of one entity are adjacent (sorted by entity, then line): identical ones
        // collapse, differing ones are refused.
        loop {
            match self.next_raw()? {
                Some((e, l)) if e == entity => {
                    if l != line {
                        return Err(Error::parse(
                            &self.label,
                            format!("entity {entity}"),
                            "given twice with different fields",
                        ));
                    }
                }
                other => {
                    self.pending = other;
                    break;
                }
            }
        }
        let seen: Seen = serde_json::from_str(&line).map_err(|_| {
            Error::from(asof_engine::Error::integrity(
                format!("sorted entries of {}", self.label),
                "a temporary run file is corrupt",
            ))
        })?;
        Ok(Some((entity, seen)))
    }
}

impl Iterator for Sorted {
    type Item = Result<(String, Seen)>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry().transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(i: u32) -> Seen {
        Seen {
            name: format!("ENTITY\n{i}"),
            locator: format!("https://example.org/{i}"),
            fields: format!(r#"{{"n":"{i}\t"}}"#),
        }
    }

    fn sorted(spill: EntrySpill) -> Result<Vec<(String, Seen)>> {
        spill.into_sorted()?.collect()
    }

    #[test]
    fn entries_come_out_in_entity_order_from_memory_and_from_runs_alike() {
        // A permutation of 0..5000, pushed out of order.
        let order: Vec<u32> = (0..5000)
            .map(|i| (i * 2_654_435_761u64 % 5000) as u32)
            .collect();
        let mut small = EntrySpill::new("gc.csv");
        let mut big = EntrySpill::with_limit("gc.csv", 20_000);
        for &i in &order {
            small.push(format!("{i:020}"), &seen(i)).unwrap();
            big.push(format!("{i:020}"), &seen(i)).unwrap();
        }
        assert_eq!(small.runs(), 0);
        assert!(big.runs() > 10, "{} runs", big.runs());
        let a = sorted(small).unwrap();
        let b = sorted(big).unwrap();
        assert_eq!(a.len(), 5000);
        assert_eq!(a, b);
        assert!(a.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(a[7], (format!("{:020}", 7), seen(7)));
    }

    #[test]
    fn an_entity_given_twice_alike_collapses_and_differently_is_refused() {
        for limit in [1, DEFAULT_LIMIT_BYTES] {
            let mut s = EntrySpill::with_limit("gc.csv", limit);
            for i in [3, 1, 3, 2] {
                s.push(format!("E{i}"), &seen(i)).unwrap();
            }
            let got: Vec<String> = sorted(s).unwrap().into_iter().map(|e| e.0).collect();
            assert_eq!(got, ["E1", "E2", "E3"]);

            let mut s = EntrySpill::with_limit("gc.csv", limit);
            s.push("E1".into(), &seen(1)).unwrap();
            s.push("E1".into(), &seen(2)).unwrap();
            let err = sorted(s).unwrap_err().to_string();
            assert!(
                err.contains("gc.csv") && err.contains("entity E1") && err.contains("twice"),
                "{err}"
            );
        }
    }
}
