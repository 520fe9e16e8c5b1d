//! What may be done to schedules while pincerd runs — list, show, add,
//! edit, remove, pause, resume, run now, history — as verbs of the
//! [`Scheduler`] handle. The gRPC service, the `schedule` tool and the
//! chats' `/schedules` only convert their requests and call these, so a
//! schedule made anywhere is checked by the same
//! [`ScheduleFields::check`] and means the same.
//!
//! A schedule declared in `config.toml` belongs to the file: it may be
//! paused, resumed and run now, but is changed or removed there.

use jiff::Timestamp;
use serde_json::{Map, Value};

use crate::config::schedules::{FieldError, ScheduleFields, ScheduleSpec};
use crate::session::Principal;
use crate::tools::origin::Inbound;

use super::scheduler::Scheduler;
use super::store::{FireRow, ScheduleRow, Source, StoreError};
use super::tick::Claimed;

/// Who makes a schedule: whose data its runs may reach, and the chat it
/// was made in (its runs are routed as that chat).
#[derive(Debug, Clone)]
pub struct Maker {
    pub principal: Principal,
    pub chat: Option<Inbound>,
}

impl Maker {
    /// The owner at the CLI or over gRPC.
    pub fn owner() -> Self {
        Self {
            principal: Principal::Owner,
            chat: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ManageError {
    #[error("there is no schedule `{0}` (`pincer schedules list` shows them)")]
    NotFound(String),
    #[error("a schedule named `{0}` exists already: pick another name, or edit it")]
    Exists(String),
    #[error(
        "schedule `{0}` is declared in config.toml: change or delete [schedules.{0}] there and run `pincer reload`"
    )]
    InConfig(String),
    #[error("schedule `{name}`: {}", field_sentence(.error))]
    Invalid { name: String, error: FieldError },
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn field_sentence(e: &FieldError) -> String {
    if e.key.is_empty() {
        e.why.clone()
    } else {
        format!("`{}`: {}", e.key, e.why)
    }
}

/// A schedule as listings show it.
#[derive(Debug, Clone)]
pub struct View {
    pub row: ScheduleRow,
    /// Its checked fields, or why they no longer check (an agent
    /// removed).
    pub spec: Result<ScheduleSpec, FieldError>,
    /// The newest row of its ledger.
    pub last: Option<FireRow>,
}

impl View {
    /// Its next fire: `None` when paused, disabled or done.
    pub fn next(&self) -> Option<Timestamp> {
        if self.row.paused || self.row.disabled.is_some() {
            return None;
        }
        match self.row.retry {
            Some((_, at)) => Some(self.row.next_at.map_or(at, |n| n.min(at))),
            None => self.row.next_at,
        }
    }

    /// `at` in the schedule's own zone, as `2026-11-30 08:00:00 CET
    /// (Europe/Berlin)`.
    pub fn local(&self, at: Timestamp) -> String {
        match &self.spec {
            Ok(spec) => {
                let zone = spec.when.zone();
                let z = at.to_zoned(zone);
                format!(
                    "{} ({})",
                    z.strftime("%Y-%m-%d %H:%M:%S %Z"),
                    spec.when.zone_name()
                )
            }
            Err(_) => at.to_string(),
        }
    }

    /// `active`, `paused` or `disabled`.
    pub fn state(&self) -> &'static str {
        if self.row.disabled.is_some() {
            "disabled"
        } else if self.row.paused {
            "paused"
        } else if self.row.next_at.is_none() && self.row.retry.is_none() {
            "done"
        } else {
            "active"
        }
    }

    /// When it fires, as written: `cron 0 8 * * 1-5 (Europe/Berlin)`.
    pub fn when(&self) -> String {
        match &self.spec {
            Ok(spec) => format!(
                "{} {} ({})",
                spec.when.kind(),
                spec.when.text(),
                spec.when.zone_name()
            ),
            Err(e) => format!("invalid: {}", field_sentence(e)),
        }
    }

    /// What it runs: `prompt: …`, `workflow NAME`, `command: …`.
    pub fn target(&self) -> String {
        let f = &self.row.fields;
        match (&f.prompt, &f.workflow, &f.command) {
            (Some(p), _, _) => format!("prompt: {}", crate::util::preview(p, 80)),
            (_, Some(w), _) => format!("workflow {w}"),
            (_, _, Some(c)) => format!("command: {}", crate::util::preview(c, 80)),
            _ => "nothing".into(),
        }
    }

    /// One line for a chat or the model: name, when, next, state.
    pub fn line(&self) -> String {
        let next = self.next().map_or_else(
            || self.state().to_string(),
            |n| format!("next {}", self.local(n)),
        );
        let last = self
            .last
            .as_ref()
            .map(|f| format!("; last {}", f.state.as_str()))
            .unwrap_or_default();
        let why = self
            .row
            .disabled
            .as_ref()
            .map(|w| format!(" ({w})"))
            .unwrap_or_default();
        format!(
            "{} — {}; {}; {next}{why}{last}",
            self.row.name,
            self.when(),
            self.target()
        )
    }
}

impl Scheduler {
    fn view(&self, row: ScheduleRow, last: Option<FireRow>) -> View {
        let config = self.runtime_config();
        let ids: Vec<&str> = config.agents.keys().map(String::as_str).collect();
        let spec = row
            .fields
            .check(&row.name, &ids, &config.default_agent, row.created_at);
        View { row, spec, last }
    }

    fn check(
        &self,
        name: &str,
        fields: &ScheduleFields,
        anchor: Timestamp,
    ) -> Result<ScheduleSpec, ManageError> {
        let config = self.runtime_config();
        let ids: Vec<&str> = config.agents.keys().map(String::as_str).collect();
        fields
            .check(name, &ids, &config.default_agent, anchor)
            .map_err(|error| ManageError::Invalid {
                name: name.to_string(),
                error,
            })
    }

    async fn row(&self, name: &str) -> Result<ScheduleRow, ManageError> {
        self.store()
            .get(name)
            .await?
            .ok_or_else(|| ManageError::NotFound(name.to_string()))
    }

    /// Every schedule, by name; only those of `principal` unless it is the
    /// owner.
    pub async fn list(&self, principal: &Principal) -> Result<Vec<View>, ManageError> {
        let mut last: std::collections::HashMap<String, FireRow> = self
            .store()
            .last_fires()
            .await?
            .into_iter()
            .map(|f| (f.schedule.clone(), f))
            .collect();
        Ok(self
            .store()
            .list()
            .await?
            .into_iter()
            .filter(|r| visible(r, principal))
            .map(|r| {
                let l = last.remove(&r.name);
                self.view(r, l)
            })
            .collect())
    }

    /// Schedule `name`.
    pub async fn show(&self, name: &str, principal: &Principal) -> Result<View, ManageError> {
        let row = self.mine(name, principal).await?;
        let last = self.store().history(name, 1).await?.into_iter().next();
        Ok(self.view(row, last))
    }

    /// Schedule `name` if `principal` may see it (as not found if not:
    /// another chat's schedules are not even named).
    async fn mine(&self, name: &str, principal: &Principal) -> Result<ScheduleRow, ManageError> {
        let row = self.row(name).await?;
        if visible(&row, principal) {
            Ok(row)
        } else {
            Err(ManageError::NotFound(name.to_string()))
        }
    }

    /// Adds schedule `name` made by `maker`, first due after now.
    pub async fn add(
        &self,
        name: &str,
        fields: ScheduleFields,
        maker: Maker,
    ) -> Result<View, ManageError> {
        let now = self.now();
        let spec = self.check(name, &fields, now)?;
        let row = ScheduleRow {
            name: name.to_string(),
            source: Source::Made,
            fields,
            principal: maker.principal.to_string(),
            chat: maker.chat,
            created_at: now,
            next_at: spec.when.next_after(now),
            paused: false,
            failures: 0,
            disabled: None,
            retry: None,
            retries: 0,
        };
        if !self.store().add(row.clone()).await? {
            return Err(ManageError::Exists(name.to_string()));
        }
        self.poke();
        Ok(self.view(row, None))
    }

    /// Changes the fields of schedule `name`: each key of `patch` replaces
    /// that field (`null` removes it). Its failures are cleared and its
    /// next fire is after now.
    pub async fn edit(
        &self,
        name: &str,
        patch: Map<String, Value>,
        principal: &Principal,
    ) -> Result<View, ManageError> {
        let row = self.mine(name, principal).await?;
        if row.source == Source::Config {
            return Err(ManageError::InConfig(name.to_string()));
        }
        let invalid = |why: String| ManageError::Invalid {
            name: name.to_string(),
            error: FieldError { key: "", why },
        };
        let mut fields = match serde_json::to_value(&row.fields) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        for (k, v) in patch {
            if v.is_null() {
                fields.remove(&k);
            } else {
                fields.insert(k, v);
            }
        }
        let fields: ScheduleFields =
            serde_json::from_value(Value::Object(fields)).map_err(|e| invalid(e.to_string()))?;
        let spec = self.check(name, &fields, row.created_at)?;
        let next = spec.when.next_after(self.now());
        if !self.store().edit(name, &fields, next).await? {
            return Err(ManageError::NotFound(name.to_string()));
        }
        self.poke();
        self.show(name, principal).await
    }

    /// Removes schedule `name`; its ledger stays.
    pub async fn remove(&self, name: &str, principal: &Principal) -> Result<(), ManageError> {
        let row = self.mine(name, principal).await?;
        if row.source == Source::Config {
            return Err(ManageError::InConfig(name.to_string()));
        }
        if !self.store().remove(name).await? {
            return Err(ManageError::NotFound(name.to_string()));
        }
        self.poke();
        Ok(())
    }

    /// Pauses schedule `name`: it fires no more until resumed (missed
    /// fires meanwhile are not made up).
    pub async fn pause(&self, name: &str, principal: &Principal) -> Result<View, ManageError> {
        self.mine(name, principal).await?;
        self.store().set_paused(name, true, None).await?;
        self.poke();
        self.show(name, principal).await
    }

    /// Resumes schedule `name` (also one disabled): its failures are
    /// cleared and it next fires after now.
    pub async fn resume(&self, name: &str, principal: &Principal) -> Result<View, ManageError> {
        let row = self.mine(name, principal).await?;
        let spec = self.check(name, &row.fields, row.created_at)?;
        let next = spec.when.next_after(self.now());
        self.store().set_paused(name, false, next).await?;
        self.poke();
        self.show(name, principal).await
    }

    /// Runs schedule `name` now, apart from its times (which stay as they
    /// are). The fire's id in the ledger.
    pub async fn run_now(&self, name: &str, principal: &Principal) -> Result<i64, ManageError> {
        let row = self.mine(name, principal).await?;
        let spec = self.check(name, &row.fields, row.created_at)?;
        let now = self.now();
        let fire = self.store().claim_now(name, now, "run now").await?;
        self.spawn_fire(Claimed {
            fire,
            schedule: row,
            spec,
            due: now,
            attempt: 1,
        });
        Ok(fire)
    }

    /// The newest `limit` rows of schedule `name`'s ledger. A removed
    /// schedule's ledger is still shown to the owner.
    pub async fn history(
        &self,
        name: &str,
        limit: u32,
        principal: &Principal,
    ) -> Result<Vec<FireRow>, ManageError> {
        match self.mine(name, principal).await {
            Ok(_) => {}
            Err(ManageError::NotFound(_)) if *principal == Principal::Owner => {}
            Err(e) => return Err(e),
        }
        let rows = self.store().history(name, limit).await?;
        if rows.is_empty() && self.store().get(name).await?.is_none() {
            return Err(ManageError::NotFound(name.to_string()));
        }
        Ok(rows)
    }
}

/// The owner sees every schedule; a chat's principal only its own.
fn visible(row: &ScheduleRow, principal: &Principal) -> bool {
    *principal == Principal::Owner || row.principal == principal.to_string()
}

impl Scheduler {
    /// What `pincer doctor` says of the schedules: each disabled one with
    /// why, each failing one with its failures in a row and last error,
    /// each whose fields no longer check; one line when all is well.
    pub async fn findings(&self) -> Vec<crate::doctor::Finding> {
        use crate::doctor::{Finding, Level};
        let finding = |level, subject: String, message: String| Finding {
            level,
            subject,
            message,
        };
        let views = match self.list(&Principal::Owner).await {
            Ok(v) => v,
            Err(e) => {
                return vec![finding(
                    Level::Error,
                    "schedules".into(),
                    format!("cannot read the schedules: {e}"),
                )];
            }
        };
        let mut out = Vec::new();
        for v in &views {
            let subject = format!("schedule {}", v.row.name);
            if let Some(why) = &v.row.disabled {
                out.push(finding(Level::Error, subject, format!("disabled: {why}")));
            } else if let Err(e) = &v.spec {
                out.push(finding(
                    Level::Error,
                    subject,
                    format!("its settings no longer hold: {}", field_sentence(e)),
                ));
            } else if v.row.failures > 0 {
                let last = v
                    .last
                    .as_ref()
                    .and_then(|f| f.detail.clone())
                    .unwrap_or_default();
                out.push(finding(
                    Level::Warn,
                    subject,
                    format!(
                        "{} failed in a row (it is disabled after {}): {last}",
                        match v.row.failures {
                            1 => "its last run".to_string(),
                            n => format!("its last {n} runs"),
                        },
                        super::plan::DISABLE_AFTER
                    ),
                ));
            }
        }
        if out.is_empty() && !views.is_empty() {
            out.push(finding(
                Level::Ok,
                "schedules".into(),
                format!("{} schedules, none failing", views.len()),
            ));
        }
        out
    }
}
