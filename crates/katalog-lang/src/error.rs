//! Located errors (and warnings) of a Katalog. The language crate collects
//! them; the CLI renders them (see [`Diagnostic::render`]).

use std::fmt;

use crate::front::source::{Loc, Source};

/// What went wrong, for programs that react to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The file could not be read.
    Io,
    /// The text is not valid YAML.
    Syntax,
    /// A value has the wrong shape or type, or a required key is missing.
    Shape,
    /// A key that the Katalog language does not know.
    UnknownKey,
    /// A path that does not parse or may not be used there.
    Path,
    /// A resource (group + kind) declared twice.
    Duplicate,
    /// A version named in a rule or in `conversion` that the resource does not serve.
    Version,
    /// A rule that cannot be shown lossless and does not say `lossy: true`.
    Lossy,
    /// An enum map that is not one-to-one.
    NotOneToOne,
    /// A rule that would change `metadata` other than labels and annotations.
    Metadata,
    /// A regular expression or template that does not compile.
    Pattern,
    /// A CEL expression that does not compile or whose examples fail.
    Cel,
    /// Two rules that write the same place.
    Conflict,
    /// Anything else that makes the Katalog invalid.
    Invalid,
    /// A rule's resource pattern that selects no resource the Katalog or
    /// Kubernetes knows (a warning).
    UnknownResource,
    /// A CRD file that cannot be used, or a Katalog the CRD's schema
    /// contradicts (a path the schema does not declare, a version it does
    /// not serve).
    Schema,
    /// A Katalog that asks for more than the deployment's authority
    /// ceiling allows (see [`crate::ceiling`]).
    Ceiling,
}

/// Whether a diagnostic makes the Katalog invalid.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    #[default]
    Error,
    /// Worth fixing, but the Katalog compiles (`katalog check --strict`
    /// refuses it).
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One located error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub kind: ErrorKind,
    pub severity: Severity,
    pub message: String,
    pub loc: Option<Loc>,
    /// The source line the location points into, for display.
    pub snippet: Option<String>,
    /// What to do about it ("did you mean `hub`?").
    pub help: Option<String>,
    /// A second place that explains the first ("first declared here").
    pub related: Option<(Loc, String)>,
}

impl Diagnostic {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            severity: Severity::Error,
            message: message.into(),
            loc: None,
            snippet: None,
            help: None,
            related: None,
        }
    }

    pub fn at(mut self, loc: Loc, source: Option<&Source>) -> Self {
        self.snippet = source.and_then(|s| s.line(loc.line)).map(str::to_string);
        self.loc = Some(loc);
        self
    }

    /// The same diagnostic as a warning.
    pub fn warning(mut self) -> Self {
        self.severity = Severity::Warning;
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn with_related(mut self, loc: Loc, note: impl Into<String>) -> Self {
        self.related = Some((loc, note.into()));
        self
    }

    /// Human rendering: `file:line:col: error: message` (or `warning:`),
    /// the line, a caret, then help and related notes.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let severity = self.severity.as_str();
        match &self.loc {
            Some(loc) => out.push_str(&format!("{loc}: {severity}: {}\n", self.message)),
            None => out.push_str(&format!("{severity}: {}\n", self.message)),
        }
        if let (Some(loc), Some(line)) = (&self.loc, &self.snippet) {
            let gutter = loc.line.to_string();
            let pad = " ".repeat(gutter.len());
            let caret_pad: String = line
                .chars()
                .take(loc.column.saturating_sub(1))
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            out.push_str(&format!(
                "{pad} |\n{gutter} | {line}\n{pad} | {caret_pad}^\n"
            ));
        }
        if let Some(help) = &self.help {
            out.push_str(&format!("  = help: {help}\n"));
        }
        if let Some((loc, note)) = &self.related {
            out.push_str(&format!("  = note: {loc}: {note}\n"));
        }
        out
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.loc {
            Some(loc) => write!(f, "{loc}: {}", self.message)?,
            None => f.write_str(&self.message)?,
        }
        if let Some(help) = &self.help {
            write!(f, " ({help})")?;
        }
        Ok(())
    }
}

/// Every error found in one run, in source order.
#[derive(Clone, Debug, Default, PartialEq, Eq, thiserror::Error)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }
    pub fn render(&self) -> String {
        let mut out: String = self.0.iter().map(|d| d.render() + "\n").collect();
        let errors = self
            .0
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count();
        let warnings = self.0.len() - errors;
        let count = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        let summary = match (errors, warnings) {
            (e, 0) => count(e, "error"),
            (0, w) => count(w, "warning"),
            (e, w) => format!("{} and {}", count(e, "error"), count(w, "warning")),
        };
        out.push_str(&summary);
        out.push_str(" found\n");
        out
    }
    pub fn sort(&mut self) {
        self.0.sort_by(|a, b| a.loc.cmp(&b.loc));
        self.0.dedup();
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

/// The closest candidate to `word`, if it is close enough to be a typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let budget = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|(distance, c)| *distance <= budget || strsim::jaro_winkler(word, c) > 0.9)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, c)| c)
}
