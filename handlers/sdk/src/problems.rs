//! Collecting errors and warnings while checking a resource.

use crate::{Checked, Metadata, Problem, Verdict};

/// Most errors (and, separately, warnings) kept by [`Problems::new`], so a
/// file with thousands of bad entries cannot produce a megabyte of problems.
pub const DEFAULT_MAX_PROBLEMS: usize = 50;

/// Errors and warnings found so far, each optionally about one file.
///
/// Report every problem you find rather than stopping at the first one: the
/// person fixing the resource sees them all at once. Past the cap, one
/// closing note says more were found.
#[derive(Debug, Clone)]
pub struct Problems {
    errors: Vec<Problem>,
    warnings: Vec<Problem>,
    cap: usize,
}

impl Default for Problems {
    fn default() -> Self {
        Self::new()
    }
}

impl Problems {
    /// An empty collector keeping up to [`DEFAULT_MAX_PROBLEMS`] of each kind.
    pub fn new() -> Self {
        Self::with_cap(DEFAULT_MAX_PROBLEMS)
    }

    /// An empty collector keeping up to `cap` problems of each kind.
    pub fn with_cap(cap: usize) -> Self {
        Self { errors: Vec::new(), warnings: Vec::new(), cap }
    }

    /// An error about the file `path`: the resource is rejected.
    pub fn error_at(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.push_error(Problem::at(path, message));
    }

    /// An error about the whole resource.
    pub fn error(&mut self, message: impl Into<String>) {
        self.push_error(Problem::new(message));
    }

    /// A warning about the file `path`: the resource is accepted, and the
    /// warning is returned to the client and kept in the marker.
    pub fn warning_at(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.push_warning(Problem::at(path, message));
    }

    /// A warning about the whole resource.
    pub fn warning(&mut self, message: impl Into<String>) {
        self.push_warning(Problem::new(message));
    }

    pub fn push_error(&mut self, problem: Problem) {
        push_capped(&mut self.errors, problem, self.cap);
    }

    pub fn push_warning(&mut self, problem: Problem) {
        push_capped(&mut self.warnings, problem, self.cap);
    }

    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    pub fn errors(&self) -> &[Problem] {
        &self.errors
    }

    pub fn warnings(&self) -> &[Problem] {
        &self.warnings
    }

    /// `Ok(warnings)` when there is no error, else `Err` with the errors
    /// and then the warnings: a rejected upload reports every problem at
    /// once, so it is fixed in one round. (Word warnings so they read right
    /// in either list; a host in strict mode rejects them too.)
    pub fn into_verdict(self) -> Verdict {
        if self.errors.is_empty() { Ok(self.warnings) } else { Err(self.all()) }
    }

    /// `Ok(metadata)` when there is no error, else `Err` as in
    /// [`Self::into_verdict`]: the shape of
    /// [`Handler::metadata`](crate::Handler::metadata).
    pub fn into_metadata(self, metadata: Metadata) -> Result<Metadata, Vec<Problem>> {
        if self.errors.is_empty() { Ok(metadata) } else { Err(self.all()) }
    }

    /// `Ok((warnings, metadata))` when there is no error, else `Err` as in
    /// [`Self::into_verdict`]: the shape of [`Handler::check`](crate::Handler::check).
    pub fn into_checked(self, metadata: Metadata) -> Checked {
        if self.errors.is_empty() { Ok((self.warnings, metadata)) } else { Err(self.all()) }
    }

    fn all(mut self) -> Vec<Problem> {
        self.errors.append(&mut self.warnings);
        self.errors
    }
}

fn push_capped(problems: &mut Vec<Problem>, problem: Problem, cap: usize) {
    if problems.len() < cap {
        problems.push(problem);
    } else if problems.len() == cap {
        let message = match &problem.path {
            Some(path) => format!("More problems of this kind were found in {path}; fix the ones above first"),
            None => "More problems of this kind were found; fix the ones above first".to_string(),
        };
        problems.push(Problem { path: problem.path, message });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        let mut problems = Problems::new();
        problems.warning_at("a.md", "w");
        assert_eq!(problems.clone().into_verdict(), Ok(vec![Problem::at("a.md", "w")]));
        problems.error("e");
        assert!(problems.has_errors());
        let every = vec![Problem::new("e"), Problem::at("a.md", "w")];
        assert_eq!(problems.clone().into_verdict(), Err(every.clone()), "errors first, then the warnings");
        assert_eq!(problems.into_metadata(vec![]), Err(every));
        assert_eq!(Problems::new().into_metadata(vec![("k".into(), "v".into())]).unwrap().len(), 1);
    }

    #[test]
    fn each_kind_is_capped_with_one_closing_note() {
        let mut problems = Problems::with_cap(3);
        for i in 0..10 {
            problems.error_at("x.toml", format!("error {i}"));
        }
        problems.warning("only one");
        assert_eq!(problems.errors().len(), 4);
        assert_eq!(
            problems.errors()[3].message,
            "More problems of this kind were found in x.toml; fix the ones above first"
        );
        assert_eq!(problems.warnings().len(), 1);
    }
}
