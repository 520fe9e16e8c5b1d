//! The store's own tests: tool calls' requests (allowed, denied,
//! expired, aborted, "always"), and workflow halts (quorum, edits,
//! revisions, inputs against a schema, restarts).

use super::*;
use crate::tools::origin::{ChatOrigin, ChatPlace};

const ASK: Ask<'static> = Ask {
    session_key: "k",
    session_id: "s1",
    agent: "main",
    tool: "exec",
    arguments: "{}",
    requester: None,
};

/// Answers the first request to show up, as the owner would.
fn answer_first_pending(
    store: &Approvals,
    allow: bool,
    always: bool,
) -> tokio::task::JoinHandle<()> {
    let s = store.clone();
    tokio::spawn(async move {
        loop {
            if let Some(p) = s.pending().first() {
                let decision = if allow {
                    Decision::Allow { always }
                } else {
                    Decision::Deny
                };
                s.decide(&p.id, decision, &Voter::cli()).await.unwrap();
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
}

async fn ask(store: &Approvals, call: Ask<'_>, timeout_ms: u64) -> (Answer, bool) {
    let cancel = CancellationToken::new();
    let mut announced = false;
    let got = store
        .request(call, Duration::from_millis(timeout_ms), &cancel, |_| {
            announced = true
        })
        .await;
    (got, announced)
}

#[tokio::test]
async fn allowed_denied_expired_aborted() {
    let store = Approvals::default();
    let cancel = CancellationToken::new();
    for (allow, want) in [(true, Answer::Allowed), (false, Answer::Denied)] {
        let decider = answer_first_pending(&store, allow, false);
        let got = store
            .request(ASK, Duration::from_secs(5), &cancel, |_| {})
            .await;
        decider.await.unwrap();
        assert_eq!(got, want);
    }
    let got = store
        .request(ASK, Duration::from_millis(20), &cancel, |_| {})
        .await;
    assert_eq!(got, Answer::Expired);
    assert!(store.pending().is_empty(), "expired requests are gone");
    cancel.cancel();
    let got = store
        .request(ASK, Duration::from_secs(5), &cancel, |_| {})
        .await;
    assert_eq!(got, Answer::Aborted);
    assert!(matches!(
        store
            .decide("nope", Decision::Allow { always: false }, &Voter::cli())
            .await,
        Err(Refusal::NotWaiting(_))
    ));
}

#[tokio::test]
async fn always_allows_later_calls_of_that_tool_in_that_session_only() {
    let store = Approvals::default();
    let decider = answer_first_pending(&store, true, true);
    let (got, _) = ask(&store, ASK, 5_000).await;
    decider.await.unwrap();
    assert_eq!(got, Answer::Allowed);
    let (again, announced) = ask(&store, ASK, 50).await;
    assert_eq!(again, Answer::Allowed);
    assert!(!announced, "an always-allowed call is not asked for");
    for other in [
        Ask {
            tool: "write",
            ..ASK
        },
        Ask {
            session_key: "other",
            session_id: "s2",
            ..ASK
        },
        // The same chat after `/new`: same key, a new session.
        Ask {
            session_id: "s3",
            ..ASK
        },
    ] {
        let (got, announced) = ask(&store, other, 20).await;
        assert_eq!(got, Answer::Expired, "{other:?} still asks");
        assert!(announced);
    }
}

#[tokio::test]
async fn a_forgotten_session_asks_again() {
    let store = Approvals::default();
    let decider = answer_first_pending(&store, true, true);
    ask(&store, ASK, 5_000).await;
    decider.await.unwrap();
    store.forget_session("s1");
    let (got, announced) = ask(&store, ASK, 20).await;
    assert_eq!(got, Answer::Expired);
    assert!(announced, "the reset session's call was asked for");
}

#[test]
fn the_requester_is_the_person_and_chat_unless_the_owner_asks() {
    assert_eq!(Requester::of(&ChatOrigin::owner(true)), None);
    let stranger = ChatOrigin {
        sender: "telegram:42".into(),
        name: "Eve".into(),
        principal: crate::session::Principal::Group {
            channel: "telegram".into(),
            chat: "-100".into(),
        },
        chat: ChatPlace::Group {
            channel: "telegram".into(),
            chat_id: "-100".into(),
            thread_id: Some("7".into()),
        },
        in_channel: true,
        ..ChatOrigin::owner(false)
    };
    assert_eq!(
        Requester::of(&stranger),
        Some(Requester {
            channel: "telegram".into(),
            sender_id: "42".into(),
            name: "Eve".into(),
            group: Some("-100".into()),
            thread: Some("7".into()),
        })
    );
}

/// The next event, waiting at most a second.
async fn next(events: &mut tokio::sync::broadcast::Receiver<ApprovalEvent>) -> ApprovalEvent {
    tokio::time::timeout(Duration::from_secs(1), events.recv())
        .await
        .expect("an event within a second")
        .expect("the store is alive")
}

fn ended(event: ApprovalEvent) -> ApprovalEnded {
    match event {
        ApprovalEvent::Ended(e) => e,
        other => panic!("not an end: {other:?}"),
    }
}

#[tokio::test]
async fn every_end_is_announced_with_who_answered() {
    let store = Approvals::default();
    let mut events = store.subscribe();
    let by = DecidedBy::Chat {
        channel: "telegram".into(),
        user_id: "1".into(),
        name: "Owner".into(),
    };
    let s = store.clone();
    let chat_by = by.clone();
    let decider = tokio::spawn(async move {
        loop {
            if let Some(p) = s.pending().first() {
                let voter = Voter {
                    by: chat_by,
                    owner: true,
                };
                s.decide(&p.id, Decision::Allow { always: true }, &voter)
                    .await
                    .unwrap();
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    ask(&store, ASK, 5_000).await;
    decider.await.unwrap();
    let ApprovalEvent::Requested(requested) = next(&mut events).await else {
        panic!("the request comes first");
    };
    let end = ended(next(&mut events).await);
    assert_eq!(end.id, requested.id);
    assert!(matches!(&end.subject, Subject::Call { tool, .. } if tool == "exec"));
    assert_eq!(end.ending, Ending::Allowed { always: true, by });

    let decider = answer_first_pending(&store, false, false);
    ask(
        &store,
        Ask {
            tool: "write",
            ..ASK
        },
        5_000,
    )
    .await;
    decider.await.unwrap();
    next(&mut events).await;
    assert_eq!(
        ended(next(&mut events).await).ending,
        Ending::Denied {
            by: Some(DecidedBy::Cli)
        }
    );

    ask(
        &store,
        Ask {
            tool: "write",
            ..ASK
        },
        20,
    )
    .await;
    next(&mut events).await;
    assert_eq!(
        ended(next(&mut events).await).ending,
        Ending::Expired {
            after: Duration::from_millis(20)
        }
    );

    // A waiting call dropped (its turn gone) ends as aborted, and
    // leaves nothing pending.
    let waiting = ask(
        &store,
        Ask {
            tool: "write",
            ..ASK
        },
        5_000,
    );
    let _ = tokio::time::timeout(Duration::from_millis(30), waiting).await;
    next(&mut events).await;
    assert_eq!(ended(next(&mut events).await).ending, Ending::Aborted);
    assert!(store.pending().is_empty());
}
