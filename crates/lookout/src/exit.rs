//! How a run ends short of a signal: [`Exit`], the error every step
//! returns with `?`, carrying its exit code and what is said on stderr.

use std::process::ExitCode;

use crate::output::error_chain;

/// Why the run ends, and so its exit code: `main` says it (`lookout: …`
/// on stderr) and exits with [`Exit::code`].
#[derive(Debug, thiserror::Error)]
pub enum Exit {
    /// Configuration that can never work, as bad flags (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The run cannot go on (exit 1).
    #[error("{0}")]
    Failure(String),
    /// The reader of stdout went away (`lookout … | head`): exit 0 quietly.
    #[error("the reader of stdout went away")]
    ReaderGone,
    /// The publisher's task failed, which its warning said (exit 1).
    #[error("the publisher's task failed")]
    PublisherFailed,
}

impl Exit {
    /// [`Exit::Usage`]: `what`, then `e` and its sources.
    pub fn usage(what: &str, e: &(dyn std::error::Error + 'static)) -> Self {
        Self::Usage(format!("{what}: {}", error_chain(e)))
    }

    /// The exit code.
    pub fn code(&self) -> ExitCode {
        match self {
            Self::Usage(_) => ExitCode::from(2),
            Self::Failure(_) | Self::PublisherFailed => ExitCode::FAILURE,
            Self::ReaderGone => ExitCode::SUCCESS,
        }
    }

    /// Says why on stderr (when there is something to say); the exit code.
    pub fn report(&self) -> ExitCode {
        match self {
            Self::Usage(why) | Self::Failure(why) => eprintln!("lookout: {why}"),
            Self::ReaderGone | Self::PublisherFailed => {}
        }
        self.code()
    }
}
