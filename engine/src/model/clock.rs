//! Instants, days and the closed vocabularies (clocks, lanes, sources) of the as-of model.
//!
//! Every timestamp in and out is RFC 3339 UTC with a literal `Z`. Parsing refuses offsets and
//! bare dates by name instead of converting them: a caller who sent `+02:00` or `2024-01-05`
//! has a bug we must surface, not guess around.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time};

use crate::error::{ClockFault, Error, Result};

/// An instant in UTC with microsecond precision (the precision of the Parquet columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(i64);

const MICROS_PER_SEC: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SEC;

impl Instant {
    pub const fn from_micros(micros: i64) -> Self {
        Instant(micros)
    }
    pub const fn micros(self) -> i64 {
        self.0
    }
    pub fn from_unix_seconds(secs: i64) -> Self {
        Instant(secs * MICROS_PER_SEC)
    }

    /// Parses a clock parameter per the spec's pattern
    /// `^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?Z$`.
    /// `param` names the parameter in the error so the caller can report it.
    pub fn parse_param(param: &str, s: &str) -> Result<Self> {
        Self::parse(s).map_err(|fault| Error::InvalidClock {
            param: param.to_owned(),
            fault,
        })
    }

    /// Parses an RFC 3339 UTC instant with a literal `Z`; says which rule was broken.
    pub fn parse(s: &str) -> Result<Self, ClockFault> {
        let b = s.as_bytes();
        let digits = |r: std::ops::Range<usize>| {
            b.get(r.clone())
                .is_some_and(|x| x.iter().all(u8::is_ascii_digit))
        };
        let date_ok = b.len() >= 10
            && digits(0..4)
            && b[4] == b'-'
            && digits(5..7)
            && b[7] == b'-'
            && digits(8..10);
        if !date_ok {
            return Err(ClockFault::Malformed);
        }
        if b.len() == 10 {
            return Err(ClockFault::BareDate);
        }
        let time_ok = b.len() >= 19
            && (b[10] == b'T')
            && digits(11..13)
            && b[13] == b':'
            && digits(14..16)
            && b[16] == b':'
            && digits(17..19);
        if !time_ok {
            return Err(ClockFault::Malformed);
        }
        let mut i = 19;
        let mut frac_micros = 0i64;
        if b.get(i) == Some(&b'.') {
            let start = i + 1;
            let mut end = start;
            while end < b.len() && b[end].is_ascii_digit() {
                end += 1;
            }
            if end == start {
                return Err(ClockFault::Malformed);
            }
            // Truncate below the microsecond: stored clocks have microsecond precision, so
            // `row <= as_of` is the same comparison against the truncated instant.
            for (k, d) in b[start..end].iter().take(6).enumerate() {
                frac_micros += i64::from(d - b'0') * 10i64.pow(5 - k as u32);
            }
            i = end;
        }
        match &b[i..] {
            b"Z" => {}
            rest if looks_like_offset(rest) => return Err(ClockFault::Offset),
            _ => return Err(ClockFault::Malformed),
        }
        let num =
            |r: std::ops::Range<usize>| s[r].parse::<u32>().map_err(|_| ClockFault::Malformed);
        let year = num(0..4)? as i32;
        let month = Month::try_from(num(5..7)? as u8).map_err(|_| ClockFault::Malformed)?;
        let date = Date::from_calendar_date(year, month, num(8..10)? as u8)
            .map_err(|_| ClockFault::Malformed)?;
        let time = Time::from_hms(num(11..13)? as u8, num(14..16)? as u8, num(17..19)? as u8)
            .map_err(|_| ClockFault::Malformed)?;
        let secs = PrimitiveDateTime::new(date, time)
            .assume_utc()
            .unix_timestamp();
        Ok(Instant(secs * MICROS_PER_SEC + frac_micros))
    }

    /// Parses any RFC 3339 timestamp (offsets allowed) and converts it to UTC. Only for source
    /// files whose format carries an offset (e.g. the EDGAR Atom feed); never for user input.
    pub fn parse_rfc3339_any(s: &str) -> Option<Self> {
        let dt = OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
        Some(Self::from_offset(dt))
    }

    pub fn from_offset(dt: OffsetDateTime) -> Self {
        let nanos = dt.unix_timestamp_nanos();
        Instant((nanos.div_euclid(1000)) as i64)
    }

    pub fn now() -> Self {
        Self::from_offset(OffsetDateTime::now_utc())
    }

    /// The UTC calendar day of this instant.
    pub fn day(self) -> Day {
        Day(self.0.div_euclid(MICROS_PER_DAY) as i32)
    }
}

/// `+HH:MM` or `-HH:MM` (or shorter forms); a leading space is a `+` that a query string's
/// form decoding turned into a space (`as_of=...T12:00:00+01:00` sent unencoded), which is
/// still an offset, not a malformed instant.
fn looks_like_offset(rest: &[u8]) -> bool {
    matches!(rest.first(), Some(b'+' | b'-' | b' '))
        && rest.len() >= 3
        && rest[1..].iter().all(|c| c.is_ascii_digit() || *c == b':')
}

impl Instant {
    /// The RFC 3339 text of the instant written into `buf`, when its year has four digits
    /// (every instant a corpus holds). Written digit by digit: instants are most of the bytes
    /// of an answer, and `write!` with padded fields was 9% of the server's CPU.
    fn write_rfc3339(self, buf: &mut [u8; 27]) -> Option<&str> {
        let secs = self.0.div_euclid(MICROS_PER_SEC);
        let micros = self.0.rem_euclid(MICROS_PER_SEC) as u32;
        let dt = OffsetDateTime::from_unix_timestamp(secs).ok()?;
        let year = u32::try_from(dt.year()).ok().filter(|y| *y <= 9999)?;
        fn put(buf: &mut [u8], at: usize, value: u32, digits: usize) {
            let mut v = value;
            for i in (0..digits).rev() {
                buf[at + i] = b'0' + (v % 10) as u8;
                v /= 10;
            }
        }
        put(buf, 0, year, 4);
        buf[4] = b'-';
        put(buf, 5, u32::from(u8::from(dt.month())), 2);
        buf[7] = b'-';
        put(buf, 8, u32::from(dt.day()), 2);
        buf[10] = b'T';
        put(buf, 11, u32::from(dt.hour()), 2);
        buf[13] = b':';
        put(buf, 14, u32::from(dt.minute()), 2);
        buf[16] = b':';
        put(buf, 17, u32::from(dt.second()), 2);
        let mut end = 19;
        if micros != 0 {
            buf[19] = b'.';
            put(buf, 20, micros, 6);
            end = 26;
            while buf[end - 1] == b'0' {
                end -= 1;
            }
        }
        buf[end] = b'Z';
        std::str::from_utf8(&buf[..=end]).ok()
    }
}

impl fmt::Display for Instant {
    /// `YYYY-MM-DDTHH:MM:SSZ`, with a fraction (trailing zeros trimmed) only when non-zero.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.write_rfc3339(&mut [0; 27]) {
            Some(text) => f.write_str(text),
            None => self.write_padded(f),
        }
    }
}

impl Instant {
    /// The general formatting, for years past four digits (and the reference the digit
    /// writer is tested against).
    fn write_padded(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.div_euclid(MICROS_PER_SEC);
        let micros = self.0.rem_euclid(MICROS_PER_SEC);
        let dt = OffsetDateTime::from_unix_timestamp(secs).map_err(|_| fmt::Error)?;
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            dt.year(),
            u8::from(dt.month()),
            dt.day(),
            dt.hour(),
            dt.minute(),
            dt.second()
        )?;
        if micros != 0 {
            let frac = format!("{micros:06}");
            write!(f, ".{}", frac.trim_end_matches('0'))?;
        }
        f.write_str("Z")
    }
}

impl Serialize for Instant {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self.write_rfc3339(&mut [0; 27]) {
            Some(text) => s.serialize_str(text),
            None => s.collect_str(self),
        }
    }
}

impl<'de> Deserialize<'de> for Instant {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Instant::parse(&s).map_err(|f| serde::de::Error::custom(format!("{s}: {f}")))
    }
}

/// A UTC calendar day (days since 1970-01-01), the unit of partitions and coverage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Day(i32);

impl Day {
    pub const fn from_days(d: i32) -> Self {
        Day(d)
    }
    pub const fn days(self) -> i32 {
        self.0
    }
    pub fn next(self) -> Self {
        Day(self.0 + 1)
    }
    pub fn prev(self) -> Self {
        Day(self.0 - 1)
    }
    pub fn start(self) -> Instant {
        Instant(i64::from(self.0) * MICROS_PER_DAY)
    }
    /// `23:59:59Z` of this day: the `published_at` of a row known only to the day.
    pub fn end_of_day(self) -> Instant {
        Instant(i64::from(self.0) * MICROS_PER_DAY + 86_399 * MICROS_PER_SEC)
    }
    pub fn from_date(date: Date) -> Self {
        Day(date.to_julian_day()
            - Date::from_calendar_date(1970, Month::January, 1)
                .unwrap()
                .to_julian_day())
    }
    pub fn to_date(self) -> Date {
        Date::from_julian_day(
            Date::from_calendar_date(1970, Month::January, 1)
                .unwrap()
                .to_julian_day()
                + self.0,
        )
        .unwrap_or(Date::MAX)
    }
    /// Appends `YYYY-MM-DD` to `out`, as `Display` writes it, without the formatting
    /// machinery: a page's coverage keys format one day per row on the hot path, where
    /// `format!` was a fifth of a request's instructions (BENCHMARKS.md).
    pub fn push_iso(self, out: &mut String) {
        self.with_iso(|text| out.push_str(text));
    }

    /// Calls `f` with the day's text as `Display` writes it: [`Self::iso`]'s bytes for a
    /// four-digit year (no allocation), else `Display`'s own. The one place that chooses, for
    /// every writer of a day on the hot path.
    pub fn with_iso<R>(self, f: impl FnOnce(&str) -> R) -> R {
        match self.iso() {
            Some(text) => f(std::str::from_utf8(&text).expect("ASCII digits")),
            None => f(&self.to_string()),
        }
    }
    /// `YYYY-MM-DD` as `Display` writes it, for a day of the years 0000 to 9999 (`None`
    /// outside them): the civil date worked out from the day number by integer arithmetic
    /// (H. Hinnant's `civil_from_days`) and written two digits at a time, where going through
    /// `time::Date` (a Julian day, then the year, month and day each worked out again from it)
    /// and a `char` pushed per digit was most of what a page's coverage keys cost to write (a
    /// hundred days a page).
    pub fn iso(self) -> Option<[u8; 10]> {
        // 0000-01-01 and 9999-12-31.
        if !(-719_528..=2_932_896).contains(&self.0) {
            return None;
        }
        // Days since 0000-03-01, one 400-year era later so that none is negative.
        let z = (self.0 + 719_468 + 146_097) as u32;
        let era = z / 146_097;
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + u32::from(month <= 2) - 400;
        let [a, b] = DIGIT_PAIRS[(year / 100) as usize];
        let [c, d] = DIGIT_PAIRS[(year % 100) as usize];
        let [e, f] = DIGIT_PAIRS[month as usize];
        let [g, h] = DIGIT_PAIRS[day as usize];
        Some([a, b, c, d, b'-', e, f, b'-', g, h])
    }
    /// Parses `YYYY-MM-DD`; `param` names the parameter in the error.
    pub fn parse_param(param: &str, s: &str) -> Result<Self> {
        s.parse().map_err(|()| {
            Error::invalid(param, format!("expected a UTC date YYYY-MM-DD, got {s:?}"))
        })
    }
    /// Parses the compact `YYYYMMDD` form used by EDGAR index files and openFDA.
    pub fn parse_compact(s: &str) -> Option<Self> {
        if s.len() != 8 || !s.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        format!("{}-{}-{}", &s[0..4], &s[4..6], &s[6..8])
            .parse()
            .ok()
    }
}

/// The two ASCII digits of each number below 100.
const DIGIT_PAIRS: [[u8; 2]; 100] = {
    let mut pairs = [[0; 2]; 100];
    let mut n = 0;
    while n < 100 {
        pairs[n] = [b'0' + (n / 10) as u8, b'0' + (n % 10) as u8];
        n += 1;
    }
    pairs
};

impl FromStr for Day {
    type Err = ();
    fn from_str(s: &str) -> std::result::Result<Self, ()> {
        let b = s.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return Err(());
        }
        let y: i32 = s[0..4].parse().map_err(|_| ())?;
        let m: u8 = s[5..7].parse().map_err(|_| ())?;
        let d: u8 = s[8..10].parse().map_err(|_| ())?;
        let date =
            Date::from_calendar_date(y, Month::try_from(m).map_err(|_| ())?, d).map_err(|_| ())?;
        Ok(Day::from_date(date))
    }
}

impl fmt::Display for Day {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.to_date();
        write!(
            f,
            "{:04}-{:02}-{:02}",
            d.year(),
            u8::from(d.month()),
            d.day()
        )
    }
}

impl Serialize for Day {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Day {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse()
            .map_err(|()| serde::de::Error::custom(format!("not a YYYY-MM-DD date: {s}")))
    }
}

macro_rules! vocabulary {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name { $(#[serde(rename = $text)] $variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
            /// The accepted spellings, for error messages that list the valid set.
            pub fn valid_set() -> String {
                Self::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
            }
        }
        impl FromStr for $name {
            type Err = ();
            fn from_str(s: &str) -> std::result::Result<Self, ()> {
                match s { $($text => Ok($name::$variant),)+ _ => Err(()) }
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }
        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some(Self::ALL.iter().map(|v| v.as_str())))
                    .into()
            }
        }
        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {}
    };
}

vocabulary!(
    /// The clocks on which visibility may be evaluated (`visible_by`).
    VisibleBy { PublishedAt = "published_at", AvailableAt = "available_at", CommittedAt = "committed_at" }
);
vocabulary!(
    /// Every clock a row may carry.
    Clock {
        EventAt = "event_at",
        PublishedAt = "published_at",
        AvailableAt = "available_at",
        AcceptanceAt = "acceptance_at",
        CommittedAt = "committed_at",
    }
);
vocabulary!(
    /// How a row's `available_at` is known: `unknown` (the source says nothing of when the
    /// row could first be read), or `local_first_seen` (the fetch minute a live poller first
    /// saw it: forward-lane rows).
    AvailabilityBasis { Unknown = "unknown", LocalFirstSeen = "local_first_seen" }
);
vocabulary!(
    /// Corpus lanes; never mixed in one answer.
    Lane { CertifiedPit = "certified_pit", ForwardFirstSeen = "forward_first_seen" }
);
vocabulary!(
    /// The closed vocabulary of source namespaces.
    SourceId {
        SecEdgar = "sec.edgar",
        FederalRegisterPi = "us.federal_register.pi",
        CftcCot = "us.cftc.cot",
        OfacSdn = "us.ofac.sdn",
        FdaDrug = "us.fda.enforcement.drug",
        FdaDevice = "us.fda.enforcement.device",
        FdaFood = "us.fda.enforcement.food",
        GleifLei = "gleif.lei",
    }
);

impl SourceId {
    /// Whether this source's rows name an SEC filer (a CIK): only EDGAR's. A filer filter on
    /// another source matches no row.
    pub const fn names_filers(self) -> bool {
        matches!(self, SourceId::SecEdgar)
    }
}

// The enums are generated by `vocabulary!`, which cannot take `#[default]` on one variant.
#[allow(clippy::derivable_impls)]
impl Default for VisibleBy {
    fn default() -> Self {
        VisibleBy::PublishedAt
    }
}
#[allow(clippy::derivable_impls)]
impl Default for AvailabilityBasis {
    fn default() -> Self {
        AvailabilityBasis::Unknown
    }
}
#[allow(clippy::derivable_impls)]
impl Default for Lane {
    fn default() -> Self {
        Lane::CertifiedPit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_pushed_as_iso_reads_as_its_display_form() {
        // Every day from 1600 to 2400, and years outside four digits (the Display fallback).
        // Each edge of the four-digit years: 0000-01-01 is day -719,528, 9999-12-31 day 2,932,896.
        let edges = [
            -800_000, -719_529, -719_528, 2_932_896, 2_932_897, 3_000_000,
        ];
        let days = (-134_774..157_000).chain(edges);
        for n in days {
            let day = Day::from_days(n);
            let mut pushed = String::from("x/");
            day.push_iso(&mut pushed);
            assert_eq!(pushed, format!("x/{day}"), "day {n}");
        }
    }

    #[test]
    fn parses_utc_instants_with_and_without_fraction() {
        let a = Instant::parse("2026-01-12T16:27:39Z").unwrap();
        assert_eq!(a.to_string(), "2026-01-12T16:27:39Z");
        let b = Instant::parse("2026-01-12T16:27:39.250Z").unwrap();
        assert_eq!(b.to_string(), "2026-01-12T16:27:39.25Z");
        assert_eq!(b.micros() - a.micros(), 250_000);
    }

    #[test]
    fn refuses_offsets_bare_dates_and_malformed_clocks_by_name() {
        assert_eq!(
            Instant::parse("2026-01-12T11:27:39-05:00"),
            Err(ClockFault::Offset)
        );
        assert_eq!(
            Instant::parse("2026-01-12T11:27:39+00:00"),
            Err(ClockFault::Offset)
        );
        // `+01:00` sent unencoded in a query string arrives with a space for its `+`.
        assert_eq!(
            Instant::parse("2026-01-29T12:00:00 01:00"),
            Err(ClockFault::Offset)
        );
        assert_eq!(Instant::parse("2026-01-12"), Err(ClockFault::BareDate));
        assert_eq!(
            Instant::parse("2026-01-12 11:27:39Z"),
            Err(ClockFault::Malformed)
        );
        assert_eq!(
            Instant::parse("2026-02-30T00:00:00Z"),
            Err(ClockFault::Malformed)
        );
        assert_eq!(
            Instant::parse("2026-01-12T24:00:00Z"),
            Err(ClockFault::Malformed)
        );
        assert_eq!(
            Instant::parse("2026-01-12T11:27:39.Z"),
            Err(ClockFault::Malformed)
        );
        assert_eq!(Instant::parse("yesterday"), Err(ClockFault::Malformed));
    }

    #[test]
    fn day_resolution_publication_is_the_last_second_of_the_utc_day() {
        let d: Day = "2022-10-03".parse().unwrap();
        assert_eq!(d.end_of_day().to_string(), "2022-10-03T23:59:59Z");
        assert_eq!(d.end_of_day().day(), d);
        assert_eq!(Instant::parse("2022-10-03T00:00:00Z").unwrap().day(), d);
        assert_eq!(Day::parse_compact("20221003"), Some(d));
    }

    #[test]
    fn vocabularies_round_trip_and_list_their_valid_set() {
        for s in SourceId::ALL {
            assert_eq!(s.as_str().parse::<SourceId>(), Ok(*s));
        }
        assert!(SourceId::valid_set().contains("us.fda.enforcement.food"));
        assert_eq!(
            "forward_first_seen".parse::<Lane>(),
            Ok(Lane::ForwardFirstSeen)
        );
        assert!("event_at".parse::<VisibleBy>().is_err());
    }
    mod laws {
        use super::*;
        use proptest::prelude::*;

        /// 0000-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999Z, the instants RFC 3339 can write.
        const FIRST: i64 = -62_167_219_200 * MICROS_PER_SEC;
        const LAST: i64 = 253_402_300_800 * MICROS_PER_SEC - 1;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(5000))]

            #[test]
            fn every_instant_prints_and_parses_back_to_itself(m in FIRST..=LAST) {
                let i = Instant::from_micros(m);
                prop_assert_eq!(Instant::parse(&i.to_string()), Ok(i));
            }

            #[test]
            fn the_digit_writer_prints_what_padded_formatting_prints(m in FIRST..=LAST) {
                struct Padded(Instant);
                impl fmt::Display for Padded {
                    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        self.0.write_padded(f)
                    }
                }
                let i = Instant::from_micros(m);
                let mut buf = [0; 27];
                let padded = Padded(i).to_string();
                prop_assert_eq!(i.write_rfc3339(&mut buf), Some(padded.as_str()));
                prop_assert_eq!(serde_json::to_string(&i).unwrap(), format!("\"{}\"", Padded(i)));
            }

            #[test]
            fn every_day_prints_and_parses_back_to_itself(d in -719_528i32..=2_932_896) {
                let day = Day::from_days(d);
                prop_assert_eq!(day.to_string().parse::<Day>(), Ok(day));
                prop_assert_eq!(day.end_of_day().day(), day);
            }

            #[test]
            fn parsing_any_text_is_an_instant_or_a_named_fault_never_a_panic(s in "\\PC{0,40}") {
                let _ = Instant::parse(&s);
                let _ = s.parse::<Day>();
                let _ = Day::parse_compact(&s);
                let _ = Instant::parse_rfc3339_any(&s);
            }

            #[test]
            fn clock_shaped_text_parses_to_what_it_says_or_is_refused(
                y in 0u32..10_000, mo in 0u32..14, d in 0u32..33, h in 0u32..26, mi in 0u32..62,
                s in 0u32..62, frac in "(\\.[0-9]{0,9})?", tail in "(Z|z|\\+0[0-9]:00|-05:00|)"
            ) {
                let text = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{frac}{tail}");
                match Instant::parse(&text) {
                    Ok(i) => {
                        prop_assert_eq!(tail.as_str(), "Z");
                        prop_assert!(frac != ".", "a bare dot is malformed");
                        // Printing it again gives the same instant, truncated to microseconds.
                        prop_assert_eq!(Instant::parse(&i.to_string()), Ok(i));
                        prop_assert!(i.to_string().starts_with(&text[..19]));
                    }
                    Err(ClockFault::Offset) => prop_assert!(tail.starts_with('+') || tail.starts_with('-')),
                    Err(_) => {}
                }
            }
        }
    }
}

/// The spec's pattern for clock strings, in and out.
pub const CLOCK_PATTERN: &str =
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?Z$";
/// The pattern of a UTC day (`YYYY-MM-DD`).
pub const DAY_PATTERN: &str = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$";

/// OpenAPI schemas of the clock types, for the server's description (feature `openapi`).
#[cfg(feature = "openapi")]
mod schema {
    use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
    use utoipa::openapi::{RefOr, Schema};

    use super::*;

    fn string(
        format: KnownFormat,
        pattern: &str,
        description: &str,
        example: &str,
    ) -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(format)))
            .pattern(Some(pattern))
            .description(Some(description))
            .examples([serde_json::Value::from(example)])
            .into()
    }

    impl utoipa::PartialSchema for Instant {
        fn schema() -> RefOr<Schema> {
            string(
                KnownFormat::DateTime,
                CLOCK_PATTERN,
                "An instant: RFC 3339 UTC with a literal Z; offsets and bare dates are refused.",
                "2026-01-29T12:00:00Z",
            )
        }
    }
    impl utoipa::ToSchema for Instant {}

    impl utoipa::PartialSchema for Day {
        fn schema() -> RefOr<Schema> {
            string(
                KnownFormat::Date,
                DAY_PATTERN,
                "A UTC calendar day, the unit of partitions and coverage.",
                "2026-01-28",
            )
        }
    }
    impl utoipa::ToSchema for Day {}
}
