//! `pincer.v1.Schedules`: the schedules, for the owner (`pincer schedules
//! list|show|add|edit|remove|pause|resume|run-now|history`). What each
//! verb does is `schedule::manage`'s; this converts (`pb`).

pub(super) mod pb;

use tonic::{Request, Response, Status};

use super::State;
use crate::schedule::manage::Maker;
use crate::session::Principal;
use pb::{AddInput, EditInput, HistoryInput};

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

#[tonic::async_trait]
impl pb::schedules_server::Schedules for SchedulesService {
    async fn list(
        &self,
        _: Request<pb::ListSchedulesRequest>,
    ) -> Result<Response<pb::ListSchedulesResponse>, Status> {
        let views = self.state.schedules.list(&OWNER).await?;
        Ok(Response::new(pb::ListSchedulesResponse {
            schedules: views.iter().map(pb::ScheduleInfo::from).collect(),
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
        Ok(Response::new(pb::ScheduleInfo::from(&view)))
    }

    async fn add(
        &self,
        r: Request<pb::AddScheduleRequest>,
    ) -> Result<Response<pb::ScheduleInfo>, Status> {
        let req = AddInput::try_from(r.into_inner())?;
        let view = self
            .state
            .schedules
            .add(&req.name, req.fields, Maker::owner())
            .await?;
        Ok(Response::new(pb::ScheduleInfo::from(&view)))
    }

    async fn edit(
        &self,
        r: Request<pb::EditScheduleRequest>,
    ) -> Result<Response<pb::ScheduleInfo>, Status> {
        let req = EditInput::try_from(r.into_inner())?;
        let view = self
            .state
            .schedules
            .edit(&req.name, req.patch, &OWNER)
            .await?;
        Ok(Response::new(pb::ScheduleInfo::from(&view)))
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
        Ok(Response::new(pb::ScheduleInfo::from(&view)))
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
        Ok(Response::new(pb::ScheduleInfo::from(&view)))
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
        let req = HistoryInput::from(r.into_inner());
        let rows = self
            .state
            .schedules
            .history(&req.name, req.limit, &OWNER)
            .await?;
        // Shown in the schedule's zone while it exists.
        let view = self.state.schedules.show(&req.name, &OWNER).await.ok();
        Ok(Response::new(pb::ScheduleHistoryResponse {
            fires: rows.iter().map(|f| pb::fire(f, view.as_ref())).collect(),
        }))
    }
}
