//! The gRPC server (SPEC §3): the socket ([`socket`]), one module per
//! service ([`agent`], [`sessions`], [`daemon`], [`tools`], [`memory`],
//! [`skills`], [`channels`], [`workflows`], [`schedules`]), plus gRPC health and
//! reflection (v1 and v1alpha, so stock `grpcurl -unix` works; built on
//! its first request, [`lazy`]). Every request passes the peer-uid check
//! first.
//!
//! Each service's handlers only convert and call the hub or a part. The
//! conversions live in the service's `pb` module (`<service>/pb.rs`; a
//! `mod pb` at the bottom of `skills.rs`): it re-exports `pincer.v1`, so
//! the handlers name messages `pb::X`, checks requests into typed inputs
//! (`TryFrom`, refusing with `request.rs`'s `RequestError`) and turns our
//! types into messages (`From`, or a function for another crate's types).
//! An import there whose name is also a message's would hide the message
//! from the handlers, so such types of ours are named by their path.
//! Our error types become statuses once, in `status.rs`.

pub mod agent;
pub mod channels;
pub mod daemon;
pub mod fit;
#[doc(hidden)]
pub mod fuzz;
mod lazy;
pub mod memory;
mod request;
pub mod schedules;
pub mod sessions;
pub mod skills;
pub mod socket;
mod status;
pub mod tools;
pub mod workflows;

use std::time::Instant;

use pincer_proto::v1::agent_server::AgentServer;
use pincer_proto::v1::channels_server::ChannelsServer;
use pincer_proto::v1::daemon_server::DaemonServer;
use pincer_proto::v1::memory_server::MemoryServer;
use pincer_proto::v1::schedules_server::SchedulesServer;
use pincer_proto::v1::sessions_server::SessionsServer;
use pincer_proto::v1::skills_server::SkillsServer;
use pincer_proto::v1::tools_server::ToolsServer;
use pincer_proto::v1::workflows_server::WorkflowsServer;
use tokio_util::sync::CancellationToken;
use tonic::service::InterceptorLayer;

use crate::agent::hub::Hub;

/// Largest request accepted (SPEC §3: messages over 1 MiB are refused).
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// What every service shares.
#[derive(Clone)]
pub struct State {
    pub hub: Hub,
    /// The chat bridges (status, pairing).
    pub channels: crate::channels::Channels,
    /// The workflow engine (runs).
    pub workflows: crate::workflow::engine::Workflows,
    /// The scheduler (schedules made and changed at run time).
    pub schedules: crate::schedule::scheduler::Scheduler,
    pub started: Instant,
    /// Cancelled to stop the daemon (Daemon.Shutdown, signals).
    pub stop: CancellationToken,
    /// Sends reload requests to the main task, which owns reloading.
    pub reload: tokio::sync::mpsc::Sender<daemon::ReloadAsk>,
    /// How long running turns get when the daemon stops (fixed at start:
    /// a reload reports `shutdown_grace_s` as needing a restart).
    pub grace: std::time::Duration,
    /// The lifecycle parts that could not start (status, doctor).
    pub failures: crate::lifecycle::Failures,
}

/// Serves until `state.stop` is cancelled; `serving` is sent once the
/// services are set up and connections are taken.
pub async fn serve(
    listener: interprocess::local_socket::tokio::Listener,
    state: State,
    serving: tokio::sync::oneshot::Sender<()>,
) -> Result<(), tonic::transport::Error> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<AgentServer<agent::AgentService>>()
        .await;
    health
        .set_serving::<SessionsServer<sessions::SessionsService>>()
        .await;
    health
        .set_serving::<DaemonServer<daemon::DaemonService>>()
        .await;
    health
        .set_serving::<ToolsServer<tools::ToolsService>>()
        .await;
    health
        .set_serving::<MemoryServer<memory::MemoryService>>()
        .await;
    health
        .set_serving::<SkillsServer<skills::SkillsService>>()
        .await;
    health
        .set_serving::<ChannelsServer<channels::ChannelsService>>()
        .await;
    health
        .set_serving::<WorkflowsServer<workflows::WorkflowsService>>()
        .await;
    health
        .set_serving::<SchedulesServer<schedules::SchedulesService>>()
        .await;

    // Built on the first reflection request, not before the first answer.
    let reflection_v1 = lazy::Lazy::new(|| built(reflection().build_v1()));
    let reflection_v1alpha = lazy::Lazy::new(|| built(reflection().build_v1alpha()));

    // On stop the socket keeps answering (Status says `stopping`, new
    // turns are refused) while running turns get the shutdown grace and are
    // then aborted; only then does the server close. Closing first would
    // wait for every streaming Chat call, i.e. for whole turns, whatever
    // the grace.
    let drained = {
        let (stop, hub, grace) = (state.stop.clone(), state.hub.clone(), state.grace);
        async move {
            stop.cancelled().await;
            tracing::info!("stopping: letting running turns finish (up to {grace:?})");
            hub.shutdown(grace).await;
        }
    };
    let mut builder =
        tonic::transport::Server::builder().layer(InterceptorLayer::new(socket::check_peer));
    let mut router = builder
        .add_service(health_service)
        .add_service(
            AgentServer::new(agent::AgentService::new(state.clone()))
                .max_decoding_message_size(MAX_MESSAGE_BYTES + 4096),
        )
        .add_service(SessionsServer::new(sessions::SessionsService::new(
            state.clone(),
        )))
        .add_service(DaemonServer::new(daemon::DaemonService::new(state.clone())))
        .add_service(ToolsServer::new(tools::ToolsService::new(state.clone())))
        .add_service(MemoryServer::new(memory::MemoryService::new(state.clone())))
        .add_service(SkillsServer::new(skills::SkillsService::new(state.clone())))
        .add_service(ChannelsServer::new(channels::ChannelsService::new(
            state.clone(),
        )))
        .add_service(WorkflowsServer::new(workflows::WorkflowsService::new(
            state.clone(),
        )))
        .add_service(SchedulesServer::new(schedules::SchedulesService::new(
            state.clone(),
        )));
    router = router
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha);
    let _ = serving.send(());
    router
        .serve_with_incoming_shutdown(socket::incoming(listener), drained)
        .await
}

/// The reflection services' builder: pincer's API and gRPC health.
fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pincer_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
}

/// A built reflection service, or `None` with the reason logged.
fn built<S>(service: Result<S, tonic_reflection::server::Error>) -> Option<S> {
    service
        .map_err(|e| tracing::error!(error = %e, "gRPC reflection is unavailable"))
        .ok()
}
