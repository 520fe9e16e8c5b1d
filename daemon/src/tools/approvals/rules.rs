//! Who may answer a request, and what an answer does to it: the one place
//! that decides. A tool call's approval is the owner's alone. A workflow's
//! approval needs its approvers (the owner among them only where the step
//! names `owner`, which it does by default) until the quorum is reached;
//! anyone of them, and always the owner, may deny it; an edit and a revise
//! end the request and the run decides what follows. An input step's data
//! is the owner's to give, and must fit the step's schema.

use serde_json::Value;

use super::request::{
    Decided, Decision, Ending, HaltAsk, PendingApproval, Refusal, Subject, Voter,
};

/// Applies `decision` by `voter` to `request` (a counted vote is added to
/// it): what it did, or why it is refused.
pub fn judge(
    request: &mut PendingApproval,
    decision: Decision,
    voter: &Voter,
) -> Result<Decided, Refusal> {
    let id = request.id.clone();
    let by = voter.by.clone();
    let halt = match &mut request.subject {
        Subject::Call { .. } => {
            if !voter.owner {
                return Err(Refusal::OwnerOnly);
            }
            return match decision {
                Decision::Allow { always } => Ok(Decided::Ended(Ending::Allowed { always, by })),
                Decision::Deny => Ok(Decided::Ended(Ending::Denied { by: Some(by) })),
                _ => Err(Refusal::CallOnly(id)),
            };
        }
        Subject::Step(halt) => halt,
    };
    let step = halt.step.clone();
    match &mut halt.ask {
        HaltAsk::Input { schema } => {
            if !voter.owner {
                return Err(Refusal::OwnerOnly);
            }
            match decision {
                Decision::Answer(data) => {
                    fits(schema.as_ref(), &data)?;
                    Ok(Decided::Ended(Ending::Answered { data, by }))
                }
                Decision::Deny => Ok(Decided::Ended(Ending::Denied { by: Some(by) })),
                _ => Err(Refusal::NotApproval(id)),
            }
        }
        HaltAsk::Approval {
            approvers,
            quorum,
            votes,
            edit,
            revisions_left,
            initiator,
            ..
        } => {
            let names = voter.names();
            let named = approvers.iter().find(|a| names.contains(a)).cloned();
            match (decision, named) {
                (Decision::Deny, named) if voter.owner || named.is_some() => {
                    Ok(Decided::Ended(Ending::Denied { by: Some(by) }))
                }
                (Decision::Answer(_), _) => {
                    let mut verbs = String::new();
                    if *edit {
                        verbs.push_str(", edit");
                    }
                    if *revisions_left > 0 {
                        verbs.push_str(", revise");
                    }
                    Err(Refusal::NotInput(id, verbs))
                }
                (_, None) => Err(Refusal::NotApprover(approvers.join(", "))),
                (Decision::Allow { .. }, Some(_))
                    if initiator.as_ref().is_some_and(|i| names.contains(i)) =>
                {
                    Err(Refusal::Initiator)
                }
                (Decision::Allow { .. }, Some(named)) => {
                    if votes.iter().any(|v| names.contains(v)) {
                        return Err(Refusal::Voted {
                            votes: votes.len(),
                            quorum: *quorum,
                        });
                    }
                    votes.push(named);
                    if votes.len() >= *quorum as usize {
                        Ok(Decided::Ended(Ending::Allowed { always: false, by }))
                    } else {
                        Ok(Decided::Counted {
                            votes: votes.len(),
                            quorum: *quorum,
                        })
                    }
                }
                (Decision::Edit(data), _) if *edit => {
                    Ok(Decided::Ended(Ending::Edited { data, by }))
                }
                (Decision::Edit(_), _) => Err(Refusal::NoEdit(step)),
                (Decision::Revise(guidance), _)
                    if *revisions_left > 0 && !guidance.trim().is_empty() =>
                {
                    Ok(Decided::Ended(Ending::Revised { guidance, by }))
                }
                (Decision::Revise(_) | Decision::Deny, _) => Err(Refusal::NoRevise(step)),
            }
        }
    }
}

/// Whether `data` fits `schema`; the error says where it does not.
fn fits(schema: Option<&Value>, data: &Value) -> Result<(), Refusal> {
    let Some(schema) = schema else {
        return Ok(());
    };
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| Refusal::BadData(format!("the step's schema does not compile: {e}")))?;
    let errors: Vec<String> = validator
        .iter_errors(data)
        .take(3)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("at {at}: {e}")
            }
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Refusal::BadData(format!(
            "the data does not fit the step's schema: {}; nothing was recorded, answer again",
            errors.join("; ")
        )))
    }
}
