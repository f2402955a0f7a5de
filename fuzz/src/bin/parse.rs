//! AFL target: one input file for an ingest adapter. The first byte picks the source and the
//! name the file is given (names select the format within a source, as on the command line);
//! the rest is the file's bytes (`asof_ingest::sources::parse_selected`, which the replay of
//! kept inputs in `ingest/src/sources/robustness.rs` uses too). An adapter must answer rows or
//! an error: a panic is a crash.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = asof_ingest::sources::parse_selected(data);
    });
}
