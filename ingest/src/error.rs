//! The ingest crate's one error type: faults name the file and the line or record.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A source file (or one of its rows) does not parse or breaks a rule.
    #[error("{file}: {location}: {message}")]
    Parse {
        file: String,
        location: String,
        message: String,
    },
    /// A setting refused before any work starts (the poller's User-Agent, rate, base URL).
    #[error("{flag}: {message}")]
    Config { flag: String, message: String },
    #[error(transparent)]
    Engine(#[from] asof_engine::Error),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// A long run (a backfill) was asked to stop; nothing of the unit in hand was published.
    #[error("stopped on request")]
    Stopped,
}

impl asof_engine::write::publish::Rebase for Error {
    fn pointer_moved(&self) -> bool {
        matches!(self, Error::Engine(e) if e.pointer_moved())
    }
}

impl Error {
    pub fn config(flag: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Config {
            flag: flag.into(),
            message: message.into(),
        }
    }

    pub fn parse(
        file: impl Into<String>,
        location: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Error::Parse {
            file: file.into(),
            location: location.into(),
            message: message.into(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
