//! Why a conversion fails, and the limit the apiserver sets on what a
//! conversion may write into annotations: shared by the evaluator and the
//! stash and remainder it calls, so that neither imports the evaluator.

use std::fmt;

/// The apiserver's limit on the total size of an object's annotations.
pub const ANNOTATIONS_LIMIT: usize = 256 * 1024;

/// Why one object could not be converted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConvertError {
    pub message: String,
    /// The rule that failed, as `file:line:col (kind)`.
    pub rule: Option<String>,
}

impl fmt::Display for ConvertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(r) = &self.rule {
            write!(f, " (rule at {r})")?;
        }
        Ok(())
    }
}

pub(super) fn fail<T>(message: impl Into<String>) -> Result<T, ConvertError> {
    Err(ConvertError {
        message: message.into(),
        rule: None,
    })
}
