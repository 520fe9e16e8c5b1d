//! `pincer.v1.Schedules`: the schedules, for the owner (`pincer schedules
//! list|show|add|edit|remove|pause|resume|run-now|history`). What each
//! verb does is `schedule::manage`'s; this converts.

use jiff::Timestamp;
use pincer_proto::v1 as pb;
use serde_json::{Map, Value};
use tonic::{Request, Response, Status};

use super::State;
use crate::schedule::manage::{Maker, View};
use crate::schedule::store::{FireRow, Source};
use crate::session::Principal;

/// Ledger rows shown when the request names no limit.
const DEFAULT_HISTORY: u32 = 20;

pub struct SchedulesService {
    state: State,
}

impl SchedulesService {
    pub fn new(state: State) -> Self {
        Self { state }
    }
}

/// Every caller of the socket is the owner.
const OWNER: Principal = Principal::Owner;

fn object(what: &str, json: &str) -> Result<Map<String, Value>, Status> {
    match serde_json::from_str::<Value>(if json.trim().is_empty() { "{}" } else { json }) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(Status::invalid_argument(format!(
            "{what} must be a JSON object"
        ))),
        Err(e) => Err(Status::invalid_argument(format!("{what} is not JSON: {e}"))),
    }
}

#[tonic::async_trait]
impl pb::schedules_server::Schedules for SchedulesService {
    async fn list(
        &self,
        _: Request<pb::ListSchedulesRequest>,
    ) -> Result<Response<pb::ListSchedulesResponse>, Status> {
        let views = self.state.schedules.list(&OWNER).await?;
        Ok(Response::new(pb::ListSchedulesResponse {
            schedules: views.iter().map(info).collect(),
        }))
    }

    async fn show(
        &self,
        r: Request<pb::ScheduleRef>,
    ) -> Result<Response<pb::ScheduleInfo>, Status> {
        let view = self
            .state
            .schedules
            .show(&r.into_inner().name, &OWNER)
            .await?;
        Ok(Response::new(info(&view)))
    }

    async fn add(
        &self,
        r: Request<pb::AddScheduleRequest>,
    ) -> Result<Response<pb::ScheduleInfo>, Status> {
        let req = r.into_inner();
        let fields =
            serde_json::from_value(Value::Object(object("fields_json", &req.fields_json)?))
                .map_err(|e| Status::invalid_argument(format!("schedule `{}`: {e}", req.name)))?;
        let view = self
            .state
            .schedules
            .add(req.name.trim(), fields, Maker::owner())
            .await?;
        Ok(Response::new(info(&view)))
    }

    async fn edit(
        &self,
        r: Request<pb::EditScheduleRequest>,
    ) -> Result<Response<pb::ScheduleInfo>, Status> {
        let req = r.into_inner();
        let patch = object("patch_json", &req.patch_json)?;
        let view = self.state.schedules.edit(&req.name, patch, &OWNER).await?;
        Ok(Response::new(info(&view)))
    }

    async fn remove(
        &self,
        r: Request<pb::ScheduleRef>,
    ) -> Result<Response<pb::RemoveScheduleResponse>, Status> {
        self.state
            .schedules
            .remove(&r.into_inner().name, &OWNER)
            .await?;
        Ok(Response::new(pb::RemoveScheduleResponse {}))
    }

    async fn pause(
        &self,
        r: Request<pb::ScheduleRef>,
    ) -> Result<Response<pb::ScheduleInfo>, Status> {
        let view = self
            .state
            .schedules
            .pause(&r.into_inner().name, &OWNER)
            .await?;
        Ok(Response::new(info(&view)))
    }

    async fn resume(
        &self,
        r: Request<pb::ScheduleRef>,
    ) -> Result<Response<pb::ScheduleInfo>, Status> {
        let view = self
            .state
            .schedules
            .resume(&r.into_inner().name, &OWNER)
            .await?;
        Ok(Response::new(info(&view)))
    }

    async fn run_now(
        &self,
        r: Request<pb::ScheduleRef>,
    ) -> Result<Response<pb::RunNowResponse>, Status> {
        let fire = self
            .state
            .schedules
            .run_now(&r.into_inner().name, &OWNER)
            .await?;
        Ok(Response::new(pb::RunNowResponse { fire }))
    }

    async fn history(
        &self,
        r: Request<pb::ScheduleHistoryRequest>,
    ) -> Result<Response<pb::ScheduleHistoryResponse>, Status> {
        let req = r.into_inner();
        let limit = if req.limit == 0 {
            DEFAULT_HISTORY
        } else {
            req.limit
        };
        let rows = self
            .state
            .schedules
            .history(&req.name, limit, &OWNER)
            .await?;
        // Shown in the schedule's zone while it exists.
        let view = self.state.schedules.show(&req.name, &OWNER).await.ok();
        Ok(Response::new(pb::ScheduleHistoryResponse {
            fires: rows.iter().map(|f| fire(f, view.as_ref())).collect(),
        }))
    }
}

fn info(v: &View) -> pb::ScheduleInfo {
    let (kind, expr, zone, agent, deliver, misfire, problem) = match &v.spec {
        Ok(s) => (
            s.when.kind().to_string(),
            s.when.text(),
            s.when.zone_name(),
            s.agent.clone(),
            s.deliver.to_string(),
            s.misfire.as_str().to_string(),
            String::new(),
        ),
        Err(e) => (
            String::new(),
            String::new(),
            String::new(),
            v.row.fields.agent.clone().unwrap_or_default(),
            v.row.fields.deliver.clone().unwrap_or_default(),
            String::new(),
            e.to_string(),
        ),
    };
    let next = v.next();
    pb::ScheduleInfo {
        name: v.row.name.clone(),
        source: match v.row.source {
            Source::Config => "config",
            Source::Made => "made",
        }
        .into(),
        principal: v.row.principal.clone(),
        kind,
        expr,
        zone,
        target: v.target(),
        agent,
        deliver,
        state: v.state().into(),
        next_at_ms: next.map_or(0, Timestamp::as_millisecond),
        next_local: next.map(|n| v.local(n)).unwrap_or_default(),
        failures: v.row.failures,
        disabled: v.row.disabled.clone().unwrap_or_default(),
        last: v.last.as_ref().map(|f| fire(f, Some(v))),
        fields_json: serde_json::to_string(&v.row.fields).unwrap_or_default(),
        problem,
        misfire,
    }
}

fn fire(f: &FireRow, view: Option<&View>) -> pb::FireInfo {
    pb::FireInfo {
        id: f.id,
        due_at_ms: f.due_at.as_millisecond(),
        due_local: view.map_or_else(|| f.due_at.to_string(), |v| v.local(f.due_at)),
        attempt: f.attempt,
        state: f.state.as_str().into(),
        ended_at_ms: f.ended_at.map_or(0, Timestamp::as_millisecond),
        missed: f.missed.map_or(0, |(n, _)| n),
        detail: f.detail.clone().unwrap_or_default(),
        output: f.output.clone().unwrap_or_default(),
    }
}
