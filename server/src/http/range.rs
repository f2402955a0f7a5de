//! Single byte ranges (RFC 9110 §14): what Parquet readers send for a file's footer and
//! columns. `bytes=a-b`, `bytes=a-` and the suffix `bytes=-n`; anything else is ignored and the
//! whole file answers, as the RFC allows (several ranges included: readers ask for one).

/// What a `Range` header asks of a file of `size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranged {
    /// No usable range: `200` with the whole file.
    Whole,
    /// `206` with bytes `start..end` (end exclusive).
    Part { start: u64, end: u64 },
    /// `416`: the range lies wholly past the end of the file.
    Unsatisfiable,
}

/// Resolves a `Range` header value against a file of `size` bytes.
pub fn resolve(header: Option<&str>, size: u64) -> Ranged {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return Ranged::Whole;
    };
    if spec.contains(',') {
        return Ranged::Whole;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Ranged::Whole;
    };
    let num = |s: &str| -> Option<Option<u64>> {
        let s = s.trim();
        if s.is_empty() {
            Some(None)
        } else if s.bytes().all(|c| c.is_ascii_digit()) {
            s.parse().ok().map(Some)
        } else {
            None
        }
    };
    match (num(a), num(b)) {
        // bytes=-n: the last n bytes.
        (Some(None), Some(Some(n))) => {
            if n == 0 || size == 0 {
                Ranged::Unsatisfiable
            } else {
                Ranged::Part {
                    start: size.saturating_sub(n),
                    end: size,
                }
            }
        }
        // bytes=a- and bytes=a-b (b clamped to the last byte).
        (Some(Some(start)), Some(last)) => {
            if last.is_some_and(|l| l < start) {
                Ranged::Whole
            } else if start >= size {
                Ranged::Unsatisfiable
            } else {
                Ranged::Part {
                    start,
                    end: last.map_or(size, |l| l.saturating_add(1).min(size)),
                }
            }
        }
        _ => Ranged::Whole,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_open_and_suffix_ranges_resolve_within_the_file() {
        assert_eq!(
            resolve(Some("bytes=0-9"), 100),
            Ranged::Part { start: 0, end: 10 }
        );
        assert_eq!(
            resolve(Some("bytes=90-"), 100),
            Ranged::Part {
                start: 90,
                end: 100
            }
        );
        assert_eq!(
            resolve(Some("bytes=90-500"), 100),
            Ranged::Part {
                start: 90,
                end: 100
            }
        );
        assert_eq!(
            resolve(Some("bytes=-8"), 100),
            Ranged::Part {
                start: 92,
                end: 100
            }
        );
        assert_eq!(
            resolve(Some("bytes=-800"), 100),
            Ranged::Part { start: 0, end: 100 }
        );
    }

    #[test]
    fn a_range_past_the_end_is_unsatisfiable_and_a_malformed_one_is_ignored() {
        assert_eq!(resolve(Some("bytes=100-"), 100), Ranged::Unsatisfiable);
        assert_eq!(resolve(Some("bytes=-0"), 100), Ranged::Unsatisfiable);
        assert_eq!(resolve(None, 100), Ranged::Whole);
        assert_eq!(resolve(Some("bytes=5-2"), 100), Ranged::Whole);
        assert_eq!(resolve(Some("bytes=0-1,5-6"), 100), Ranged::Whole);
        assert_eq!(resolve(Some("items=0-1"), 100), Ranged::Whole);
        assert_eq!(resolve(Some("bytes=x-1"), 100), Ranged::Whole);
    }
}
