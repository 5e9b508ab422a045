//! The resource-dependency audit trail (SPEC "8–9 in detail"): one JSON
//! object per grant, denial, runtime failure and admin-consent decision (and
//! per publication decision and handler reload, with the admin who made it), on
//! the tracing target `DIAL_RESOURCE_DEPS_AUDIT`, and one line per event in
//! `audit.file` when it is set. Events name the application, the targets,
//! the originating user, the trace id and the source deployment — never
//! link ids, keys or tokens.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;

use crate::auth::Caller;
use crate::permissions::Permissions;

/// One application call, as dependency resolution and its audit events see it.
pub struct Call<'a> {
    /// The deployment id of the application being called.
    pub deployment: &'a str,
    /// The originating user, as themselves (never an application's key).
    pub user: &'a Caller,
    /// `root`, or the id of the application making the call.
    pub source_deployment: &'a str,
    pub trace_id: &'a str,
    /// Whether the application will receive the key (MCP may not).
    pub key_forwarded: bool,
}

/// The tracing target audit events go to.
pub const TARGET: &str = "DIAL_RESOURCE_DEPS_AUDIT";

#[derive(Debug, Clone, Serialize)]
pub struct AuditEvent {
    pub event: &'static str,
    pub app: String,
    pub targets: Vec<String>,
    pub user: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_deployment: Option<String>,
    pub outcome: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it was emitted, in epoch milliseconds (stamped by [`Audit::emit`]).
    pub timestamp: i64,
}

impl AuditEvent {
    fn for_call(event: &'static str, call: &Call<'_>, target: &str, outcome: String, reason: Option<String>) -> Self {
        Self {
            event,
            app: call.deployment.to_string(),
            targets: vec![target.to_string()],
            user: call.user.author_name(),
            trace_id: Some(call.trace_id.to_string()),
            source_deployment: Some(call.source_deployment.to_string()),
            outcome,
            reason,
            timestamp: 0,
        }
    }

    pub fn grant(call: &Call<'_>, target: &str, granted: Permissions) -> Self {
        Self::for_call(
            "resource_dependency_grant",
            call,
            target,
            format!("granted {}", granted.names().join("+")),
            None,
        )
    }

    pub fn denial(call: &Call<'_>, target: &str, reason: &str) -> Self {
        Self::for_call("resource_dependency_denial", call, target, "denied".into(), Some(reason.into()))
    }

    pub fn runtime_fail(call: &Call<'_>, target: &str, reason: &str) -> Self {
        Self::for_call("resource_dependency_runtime_fail", call, target, "call refused".into(), Some(reason.into()))
    }

    /// An admin granted (`granted`) or withdrew consent for `app`'s declaration.
    pub fn admin_consent(app: &str, targets: Vec<String>, admin: &str, granted: bool) -> Self {
        Self {
            event: if granted { "admin_consent_grant" } else { "admin_consent_withdraw" },
            app: app.to_string(),
            targets,
            user: admin.to_string(),
            trace_id: None,
            source_deployment: None,
            outcome: if granted { "granted" } else { "withdrawn" }.into(),
            reason: None,
            timestamp: 0,
        }
    }
}

impl AuditEvent {
    /// An admin approved or rejected a publication: `app` is the
    /// publication, `targets` what it adds or removes in `public`, `reason`
    /// the comment.
    pub fn publication_decision(publication: &crate::publication::Publication) -> Self {
        let approved = publication.status == crate::publication::Status::Approved;
        Self {
            event: if approved { "publication_approve" } else { "publication_reject" },
            app: publication.url.clone(),
            targets: publication.resources.iter().map(|r| r.target_url.clone()).collect(),
            user: publication.decided_by.clone().unwrap_or_default(),
            trace_id: None,
            source_deployment: None,
            outcome: if approved { "approved" } else { "rejected" }.into(),
            reason: publication.comment.clone(),
            timestamp: 0,
        }
    }

    /// An admin reloaded the handlers: `targets` the groups loaded, updated
    /// or removed (`group:change`), `reason` the files that failed.
    pub fn handlers_reload(admin: &str, changes: Vec<String>, failures: Vec<String>) -> Self {
        Self {
            event: "handlers_reload",
            app: String::new(),
            targets: changes,
            user: admin.to_string(),
            trace_id: None,
            source_deployment: None,
            outcome: if failures.is_empty() { "reloaded" } else { "reloaded with failures" }.into(),
            reason: (!failures.is_empty()).then(|| failures.join("; ")),
            timestamp: 0,
        }
    }

    /// Someone who is no admin tried to read, grant or withdraw `app`'s
    /// admin consent: refused.
    pub fn admin_consent_refused(event: &'static str, app: &str, user: &str) -> Self {
        Self {
            event,
            app: app.to_string(),
            targets: Vec::new(),
            user: user.to_string(),
            trace_id: None,
            source_deployment: None,
            outcome: "denied".into(),
            reason: Some("only admins may decide admin consent".into()),
            timestamp: 0,
        }
    }

    /// An application's per-request key tried to consent (or read or
    /// withdraw a consent) for `app`: refused.
    pub fn consent_refused(event: &'static str, app: &str, user: &str, source: &str, trace_id: &str) -> Self {
        Self {
            event,
            app: app.to_string(),
            targets: Vec::new(),
            user: user.to_string(),
            trace_id: Some(trace_id.to_string()),
            source_deployment: Some(source.to_string()),
            outcome: "denied".into(),
            reason: Some("a per-request key cannot consent for its user".into()),
            timestamp: 0,
        }
    }
}

/// Where events go.
#[derive(Clone, Default)]
pub struct Audit {
    file: Option<Arc<Mutex<std::fs::File>>>,
}

impl Audit {
    /// Events to the tracing target, and to `file` when given (appended).
    pub fn open(file: Option<&PathBuf>) -> std::io::Result<Self> {
        let file = match file {
            Some(path) => {
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent)?;
                }
                Some(Arc::new(Mutex::new(std::fs::OpenOptions::new().create(true).append(true).open(path)?)))
            }
            None => None,
        };
        Ok(Self { file })
    }

    /// Stamps `event` and records it: as structured fields on the tracing
    /// target (a log shipper indexes `event`, `app`, `trace_id` …), and as
    /// one JSON line in `audit.file`.
    pub fn emit(&self, mut event: AuditEvent) {
        event.timestamp = crate::clock::now_ms();
        tracing::info!(
            target: TARGET,
            event = event.event,
            app = event.app.as_str(),
            targets = event.targets.join(" ").as_str(),
            user = event.user.as_str(),
            trace_id = event.trace_id.as_deref(),
            source_deployment = event.source_deployment.as_deref(),
            outcome = event.outcome.as_str(),
            reason = event.reason.as_deref(),
            // Not `timestamp`: the log line has its own, and a JSON line
            // with a key twice is invalid for strict parsers.
            event_time_ms = event.timestamp,
            "resource dependency audit"
        );
        if let Some(file) = &self.file {
            let line = serde_json::to_string(&event).expect("audit events serialize");
            let mut file = file.lock().unwrap_or_else(PoisonError::into_inner);
            if let Err(error) = writeln!(file, "{line}") {
                tracing::error!(%error, "could not append to the audit file");
            }
        }
    }
}
