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

fn halt(ask: HaltAsk) -> Halt {
    Halt {
        run: "r1".into(),
        workflow: "ship".into(),
        step: "ok".into(),
        seq: 3,
        prompt: "Ship it?".into(),
        ask,
    }
}

fn approval(approvers: &[&str], quorum: u32) -> HaltAsk {
    HaltAsk::Approval {
        data: Some(serde_json::json!({"v": 1})),
        approvers: approvers.iter().map(|a| a.to_string()).collect(),
        quorum,
        votes: Vec::new(),
        edit: false,
        revisions_left: 0,
        initiator: None,
    }
}

fn chat(id: &str, owner: bool) -> Voter {
    Voter {
        by: DecidedBy::Chat {
            channel: "telegram".into(),
            user_id: id.into(),
            name: format!("user {id}"),
        },
        owner,
    }
}

async fn ask_halt(store: &Approvals, ask: HaltAsk) -> String {
    let in_a_day = SystemTime::now() + Duration::from_secs(86_400);
    store
        .ask_halt("main", "agent:main:workflow:r1", halt(ask), in_a_day, None)
        .await
        .unwrap()
        .id
}

#[tokio::test]
async fn a_quorum_counts_each_approver_once_and_strangers_not_at_all() {
    let store = Approvals::default();
    let id = ask_halt(&store, approval(&["owner", "telegram:7"], 2)).await;
    let allow = Decision::Allow { always: false };
    assert!(matches!(
        store.decide(&id, allow.clone(), &chat("9", false)).await,
        Err(Refusal::NotApprover(list)) if list == "owner, telegram:7"
    ));
    assert_eq!(
        store
            .decide(&id, allow.clone(), &Voter::cli())
            .await
            .unwrap(),
        Decided::Counted {
            votes: 1,
            quorum: 2
        }
    );
    // The owner again, from their chat: the same person.
    assert!(matches!(
        store.decide(&id, allow.clone(), &chat("1", true)).await,
        Err(Refusal::Voted {
            votes: 1,
            quorum: 2
        })
    ));
    assert!(matches!(
        store.decide(&id, allow.clone(), &chat("7", false)).await,
        Ok(Decided::Ended(Ending::Allowed { .. }))
    ));
    assert!(store.pending().is_empty());
}

#[tokio::test]
async fn the_owner_may_deny_what_they_may_not_approve_and_edits_need_the_step_to_take_them() {
    let store = Approvals::default();
    let id = ask_halt(&store, approval(&["telegram:7"], 1)).await;
    assert!(matches!(
        store
            .decide(&id, Decision::Allow { always: false }, &Voter::cli())
            .await,
        Err(Refusal::NotApprover(_))
    ));
    assert!(matches!(
        store
            .decide(&id, Decision::Edit(serde_json::json!({"v": 2})), &chat("7", false))
            .await,
        Err(Refusal::NoEdit(step)) if step == "ok"
    ));
    assert!(matches!(
        store
            .decide(&id, Decision::Revise("shorter".into()), &chat("7", false))
            .await,
        Err(Refusal::NoRevise(_))
    ));
    assert!(matches!(
        store.decide(&id, Decision::Deny, &Voter::cli()).await,
        Ok(Decided::Ended(Ending::Denied {
            by: Some(DecidedBy::Cli)
        }))
    ));
}

#[tokio::test]
async fn an_input_takes_only_data_that_fits_its_schema_and_only_from_the_owner() {
    let store = Approvals::default();
    let schema = serde_json::json!({"type": "object", "required": ["to"]});
    let id = ask_halt(
        &store,
        HaltAsk::Input {
            schema: Some(schema),
        },
    )
    .await;
    let refused = store
        .decide(&id, Decision::Answer(serde_json::json!({})), &Voter::cli())
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("does not fit the step's schema"),
        "{refused}"
    );
    assert!(store.get(&id).is_some(), "refused data leaves it waiting");
    assert!(matches!(
        store
            .decide(
                &id,
                Decision::Answer(serde_json::json!({"to": "x"})),
                &chat("7", false)
            )
            .await,
        Err(Refusal::OwnerOnly)
    ));
    let data = serde_json::json!({"to": "x"});
    assert!(matches!(
        store.decide(&id, Decision::Answer(data.clone()), &Voter::cli()).await,
        Ok(Decided::Ended(Ending::Answered { data: d, .. })) if d == data
    ));
}

#[tokio::test]
async fn only_the_owner_answers_a_tool_call() {
    let store = Approvals::default();
    let s = store.clone();
    let stranger = tokio::spawn(async move {
        loop {
            if let Some(p) = s.pending().first() {
                let refused = s
                    .decide(&p.id, Decision::Allow { always: false }, &chat("9", false))
                    .await;
                assert!(matches!(refused, Err(Refusal::OwnerOnly)));
                s.decide(&p.id, Decision::Deny, &Voter::cli())
                    .await
                    .unwrap();
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let (got, _) = ask(&store, ASK, 5_000).await;
    stranger.await.unwrap();
    assert_eq!(got, Answer::Denied);
}

#[tokio::test]
async fn halts_outlive_a_restart_and_tool_calls_end_aborted_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("approvals.db");
    let first = Approvals::open(&path).await.unwrap();
    let halted = ask_halt(&first, approval(&["owner"], 1)).await;
    let call = {
        let now = SystemTime::now();
        let (info, _) = first
            .register(PendingApproval {
                id: String::new(),
                agent: "main".into(),
                session_key: "k".into(),
                requested_at: now,
                expires_at: now + Duration::from_secs(60),
                requester: None,
                subject: Subject::Call {
                    session_id: "s1".into(),
                    tool: "exec".into(),
                    arguments: "{}".into(),
                },
            })
            .await
            .unwrap();
        info.id
    };
    drop(first);

    let second = Approvals::open(&path).await.unwrap();
    let waiting: Vec<String> = second.pending().into_iter().map(|p| p.id).collect();
    assert_eq!(
        waiting,
        std::slice::from_ref(&halted),
        "the halt waits again, the call does not"
    );
    assert!(matches!(
        second.wait(&call).await,
        Ok(Some(Ending::Aborted))
    ));
    let (latest, ending) = second.latest_halt("r1", "ok").await.unwrap().unwrap();
    assert_eq!((latest.id.as_str(), ending), (halted.as_str(), None));
    // An answer after the restart is written, and read back after another.
    second
        .decide(&halted, Decision::Allow { always: false }, &Voter::cli())
        .await
        .unwrap();
    drop(second);
    let third = Approvals::open(&path).await.unwrap();
    assert!(third.pending().is_empty());
    let (_, ending) = third.latest_halt("r1", "ok").await.unwrap().unwrap();
    assert!(matches!(ending, Some(Ending::Allowed { .. })), "{ending:?}");
}

#[tokio::test]
async fn whoever_started_the_run_may_deny_but_not_approve_a_not_initiator_step() {
    let store = Approvals::default();
    let mut ask = approval(&["owner", "telegram:7"], 1);
    if let HaltAsk::Approval { initiator, .. } = &mut ask {
        *initiator = Some("owner".into());
    }
    let id = ask_halt(&store, ask).await;
    let allow = Decision::Allow { always: false };
    // The owner started it: not from the CLI, nor from their chat.
    for voter in [Voter::cli(), chat("1", true)] {
        assert!(matches!(
            store.decide(&id, allow.clone(), &voter).await,
            Err(Refusal::Initiator)
        ));
    }
    assert!(matches!(
        store.decide(&id, allow.clone(), &chat("7", false)).await,
        Ok(Decided::Ended(Ending::Allowed { .. }))
    ));

    let mut ask = approval(&["owner", "telegram:7"], 1);
    if let HaltAsk::Approval { initiator, .. } = &mut ask {
        *initiator = Some("telegram:7".into());
    }
    let id = ask_halt(&store, ask).await;
    assert!(matches!(
        store.decide(&id, allow, &chat("7", false)).await,
        Err(Refusal::Initiator)
    ));
    assert!(matches!(
        store.decide(&id, Decision::Deny, &chat("7", false)).await,
        Ok(Decided::Ended(Ending::Denied { .. }))
    ));
}
