//! What one turn's loop knows between model calls ([`TurnState`]): the
//! counts its limits read, the text answered so far, the notes for the
//! next call, and whether (and why) the next call is the last one, made
//! without tools. The loop in `turn/mod.rs` asks these verbs instead of
//! keeping a dozen loose variables, so each rule lives in one place.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::llm::Message;

/// How many times a reply cut by `finish_reason = length` is continued.
const MAX_CONTINUATIONS: u32 = 2;

/// Why the turn's last call is made without tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastCall {
    /// The model-call or wall-time limit was reached.
    Limit,
    /// Loop detection stopped the tool calls.
    Loop,
    /// Nothing more fits in the model's window.
    Context,
}

/// An agent's limits on one turn.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_model_calls: u32,
    pub max_duration: Duration,
    /// When the turn started plus `max_duration`.
    pub deadline: Instant,
}

#[derive(Debug, Default)]
pub struct TurnState {
    model_calls: u32,
    tool_calls: u32,
    /// Replies cut by the output limit and continued since the last tool
    /// calls.
    continuations: u32,
    /// The text of the calls since the last tool calls.
    answer: String,
    /// The text of each earlier stretch of this turn.
    segments: Vec<String>,
    last_call: Option<LastCall>,
    /// Notes to the model after the history, for the next call.
    extra: Vec<Message>,
    /// Replies rolled back since the last tool calls.
    rollbacks: u32,
    /// Set by a tool call's result when loop detection ends the tools.
    loop_stop: Option<String>,
    /// Calls already made of the tools that run once per turn.
    dedupe_done: HashSet<String>,
    overflow_retries: u32,
    /// Set when compaction cannot shrink the history any further.
    compaction_spent: bool,
}

impl TurnState {
    pub fn model_calls(&self) -> u32 {
        self.model_calls
    }

    pub fn tool_calls(&self) -> u32 {
        self.tool_calls
    }

    pub fn extra(&self) -> &[Message] {
        &self.extra
    }

    pub fn dedupe_done(&self) -> &HashSet<String> {
        &self.dedupe_done
    }

    pub fn is_last_call(&self) -> bool {
        self.last_call.is_some()
    }

    /// Before each call: a loop stop or a limit reached makes it the last
    /// one, with a note telling the model to answer without tools.
    pub fn check_stops(&mut self, limits: &Limits, now: Instant) {
        if let Some(reason) = self.loop_stop.take() {
            self.end_tools(
                LastCall::Loop,
                format!(
                    "[pincer] Loop detection stopped the tool calls: {reason}. Do not call tools; summarise what you found and what is still open."
                ),
            );
        }
        if self.model_calls >= limits.max_model_calls || now >= limits.deadline {
            self.end_tools(
                LastCall::Limit,
                format!(
                    "[pincer] The turn has reached its limit ({} model calls or {} minutes). Do not call tools; answer now with what you have found so far.",
                    limits.max_model_calls,
                    limits.max_duration.as_secs() / 60
                ),
            );
        }
    }

    /// Nothing more fits in the window and nothing more can be compacted:
    /// the model answers from what it has.
    pub fn out_of_context(&mut self) {
        self.end_tools(
            LastCall::Context,
            "[pincer] The conversation has reached the model's context limit. Do not call tools; answer now with what you have found so far.".into(),
        );
    }

    /// Makes the next call the last one, for `why`; the first reason
    /// stands.
    fn end_tools(&mut self, why: LastCall, note: String) {
        if self.last_call.is_none() {
            self.last_call = Some(why);
            self.extra.push(Message::user(note));
        }
    }

    pub fn may_compact(&self) -> bool {
        !self.compaction_spent
    }

    /// Compaction could not shrink the history: it is not tried again
    /// before something new is added.
    pub fn compaction_spent(&mut self) {
        self.compaction_spent = true;
    }

    /// A compaction after an overflow freed room.
    pub fn compacted(&mut self) {
        self.compaction_spent = false;
    }

    /// Counts a provider's context-overflow refusal; returns how many this
    /// turn has had.
    pub fn overflowed(&mut self) -> u32 {
        self.overflow_retries += 1;
        self.overflow_retries
    }

    pub fn model_called(&mut self) {
        self.model_calls += 1;
    }

    /// Whether a reply may still be rolled back (never the last call's).
    pub fn may_roll_back(&self, max_rollbacks: u32) -> bool {
        self.last_call.is_none() && self.rollbacks < max_rollbacks
    }

    /// A reply was rolled back: the next call carries `note` instead of
    /// it. Returns the rollbacks since the last tool calls.
    pub fn rolled_back(&mut self, note: String) -> u32 {
        self.rollbacks += 1;
        self.extra = vec![Message::user(note)];
        self.rollbacks
    }

    /// Adds a reply's text to the answer under way.
    pub fn answered(&mut self, text: &str) {
        self.answer.push_str(text);
    }

    /// A reply cut by the output limit is continued, at most
    /// [`MAX_CONTINUATIONS`] times and never on the last call. Returns
    /// whether it will be.
    pub fn continue_cut_reply(&mut self) -> bool {
        if self.continuations >= MAX_CONTINUATIONS || self.last_call.is_some() {
            return false;
        }
        self.continuations += 1;
        self.extra = vec![Message::user(
            "[pincer] Your reply was cut off by the output limit. Continue exactly where it stopped, without repeating anything.",
        )];
        true
    }

    /// The model called tools: the answer so far becomes a segment, the
    /// notes and the per-stretch counts start over.
    pub fn start_tool_calls(&mut self) {
        self.extra.clear();
        if !self.answer.is_empty() {
            self.segments.push(std::mem::take(&mut self.answer));
        }
        self.continuations = 0;
        self.rollbacks = 0;
    }

    /// Counts a tool call; `dedupe` is its key when the tool runs once per
    /// turn.
    pub fn tool_called(&mut self, dedupe: Option<String>) {
        self.tool_calls += 1;
        if let Some(key) = dedupe {
            self.dedupe_done.insert(key);
        }
    }

    /// Loop detection asked to end the tool calls.
    pub fn stop_tools(&mut self, reason: String) {
        self.loop_stop = Some(reason);
    }

    /// The segments so far, for an aborted turn.
    pub fn take_segments(&mut self) -> Vec<String> {
        std::mem::take(&mut self.segments)
    }

    /// How the turn ended when the model answered: `done`, or why its
    /// last call had no tools.
    pub fn stop_reason(&self) -> &'static str {
        match self.last_call {
            None => "done",
            Some(LastCall::Limit) => "limit",
            Some(LastCall::Loop) => "loop",
            Some(LastCall::Context) => "context",
        }
    }

    /// The final answer and every segment of the turn, the answer's last
    /// stretch included.
    pub fn finish(mut self) -> (String, Vec<String>) {
        if !self.answer.is_empty() {
            self.segments.push(self.answer.clone());
        }
        (self.answer, self.segments)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_model_calls: u32, deadline: Instant) -> Limits {
        Limits {
            max_model_calls,
            max_duration: Duration::from_secs(600),
            deadline,
        }
    }

    #[test]
    fn the_first_reason_for_a_last_call_stands_and_adds_one_note() {
        let now = Instant::now();
        let mut state = TurnState::default();
        state.stop_tools("the same call 5 times".into());
        state.model_called();
        // Both a loop stop and the call limit: the loop is why.
        state.check_stops(&limits(1, now + Duration::from_secs(60)), now);
        assert!(state.is_last_call());
        assert_eq!(state.stop_reason(), "loop");
        assert_eq!(state.extra().len(), 1);
        state.out_of_context();
        assert_eq!(state.stop_reason(), "loop");
        assert_eq!(state.extra().len(), 1);
    }

    #[test]
    fn the_deadline_makes_the_next_call_the_last() {
        let now = Instant::now();
        let mut state = TurnState::default();
        let ten = limits(10, now + Duration::from_secs(1));
        state.check_stops(&ten, now);
        assert!(!state.is_last_call());
        state.check_stops(&ten, now + Duration::from_secs(1));
        assert_eq!(state.stop_reason(), "limit");
    }

    #[test]
    fn a_cut_reply_is_continued_twice_then_never_on_the_last_call() {
        let mut state = TurnState::default();
        assert!(state.continue_cut_reply());
        assert!(state.continue_cut_reply());
        assert!(!state.continue_cut_reply());
        state.start_tool_calls();
        assert!(state.continue_cut_reply());
        state.out_of_context();
        state.start_tool_calls();
        assert!(!state.continue_cut_reply());
    }

    #[test]
    fn rollbacks_are_counted_per_stretch_and_never_on_the_last_call() {
        let mut state = TurnState::default();
        assert!(state.may_roll_back(1));
        assert_eq!(state.rolled_back("try again".into()), 1);
        assert!(!state.may_roll_back(1));
        state.start_tool_calls();
        assert!(state.may_roll_back(1));
        state.out_of_context();
        assert!(!state.may_roll_back(1));
    }

    #[test]
    fn segments_split_the_answer_at_tool_calls() {
        let mut state = TurnState::default();
        state.answered("Looking. ");
        state.start_tool_calls();
        state.answered("Found it.");
        let (answer, segments) = state.finish();
        assert_eq!(answer, "Found it.");
        assert_eq!(segments, ["Looking. ", "Found it."]);
    }

    #[test]
    fn compaction_is_tried_again_only_after_it_freed_room() {
        let mut state = TurnState::default();
        assert!(state.may_compact());
        state.compaction_spent();
        assert!(!state.may_compact());
        assert_eq!(state.overflowed(), 1);
        state.compacted();
        assert!(state.may_compact());
    }
}
