//! The tool policy pipeline (SPEC §8.3): before the model sees any tool,
//! the registry is narrowed by layers, in order — profile, per-provider,
//! global, agent, channel/group, role (the sender's guild roles), sender,
//! sandbox, sub-agent — then
//! owner-only tools are removed for senders who are not owners, and the
//! **data boundary** removes for them what reaches the owner's data or
//! machine unless their chat's own layers name it ([`boundary`]). Deny wins;
//! an empty allow means "no restriction at this layer"; a non-empty allow
//! is an allowlist, except in the layer that sets the profile, where it
//! adds to the profile; a layer can only narrow. Every removed tool keeps
//! the layer and the pattern that removed it, so `pincer tools list` can
//! explain each decision. Each offered tool also says whether its calls
//! wait for the owner's approval (the agent's `ask`, [`Verdict::asks`]):
//! the pipeline asks for exactly the tools `pincer tools list` marks.

use super::pattern::{ToolFacts, ToolPatterns};
use super::{ToolDef, ToolRegistry};
use crate::config::{
    AgentSettings, MemoryScope, ModelTarget, PolicySettings, SandboxMode, ToolLayer,
};

/// What each profile offers, as patterns.
fn profile_patterns(profile: &str) -> &'static [&'static str] {
    match profile {
        "minimal" => &["session_status"],
        "messaging" => &["group:messaging", "group:sessions", "group:memory"],
        "coding" => &[
            "group:fs",
            "group:runtime",
            "group:web",
            "group:memory",
            "group:sessions",
        ],
        _ => &["*"],
    }
}

struct Compiled {
    name: String,
    /// The profile's patterns plus the layer's allow (additions), or the
    /// layer's allowlist; empty: no restriction.
    pass: ToolPatterns,
    profile: Option<String>,
    deny: ToolPatterns,
}

impl Compiled {
    fn new(name: String, layer: &ToolLayer) -> Self {
        let mut pass = ToolPatterns::new(&layer.allow);
        if let Some(profile) = &layer.profile {
            pass.extend(ToolPatterns::of_strs(profile_patterns(profile)));
        }
        Self {
            name,
            pass,
            profile: layer.profile.clone(),
            deny: ToolPatterns::new(&layer.deny),
        }
    }

    /// `None` when the tool passes; otherwise why not.
    fn reject(&self, tool: &ToolFacts) -> Option<String> {
        if let Some(p) = self.deny.first_match(tool) {
            return Some(format!("denied by `{p}`"));
        }
        if self.pass.is_empty() || self.pass.first_match(tool).is_some() {
            return None;
        }
        Some(match &self.profile {
            Some(profile) => format!("not in profile `{profile}` nor in its allow list"),
            None => "not in the allow list".into(),
        })
    }
}

pub use super::origin::ChatOrigin;

/// Who is asking, in what chat: the inputs beyond the config.
#[derive(Debug, Clone)]
pub struct PolicyInput<'a> {
    pub agent: &'a AgentSettings,
    /// The model the turn calls first (per-provider layers).
    pub model: Option<&'a ModelTarget>,
    /// The channel or group layers of the chat, from the bridge config
    /// (several when one turn answers messages from several chats).
    pub channel: &'a [ToolLayer],
    /// The layers of the senders' guild roles in that chat (Discord): more
    /// layers of the chat's own.
    pub role: &'a [ToolLayer],
    /// The layers of the senders in that chat: a turn that answers several
    /// senders runs under all of them, so the most restrictive wins.
    pub sender: &'a [ToolLayer],
    pub owner: bool,
    /// The agent's main (CLI) session: not sandboxed in `non-main` mode.
    pub main_session: bool,
    /// Set for sub-agent sessions: the spawn's own narrowing, on top of
    /// `[tools.subagents]`.
    pub subagent: Option<&'a ToolLayer>,
    /// The profile when neither the agent nor `[tools]` sets one.
    pub default_profile: &'a str,
}

impl<'a> PolicyInput<'a> {
    /// The owner talking to `agent` from the CLI.
    pub fn owner(agent: &'a AgentSettings) -> Self {
        Self {
            agent,
            model: agent.models.first(),
            channel: &[],
            role: &[],
            sender: &[],
            owner: true,
            main_session: true,
            subagent: None,
            default_profile: "full",
        }
    }
}

impl<'a> PolicyInput<'a> {
    /// A turn of `agent` answering `origin`; `subagent` for a child
    /// session's spawn layer.
    pub fn for_origin(
        agent: &'a AgentSettings,
        origin: &'a ChatOrigin,
        subagent: Option<&'a ToolLayer>,
    ) -> Self {
        Self {
            agent,
            model: agent.models.first(),
            channel: &origin.channel,
            role: &origin.role_layers,
            sender: &origin.sender_layers,
            owner: origin.is_owner(),
            main_session: origin.main_session,
            subagent,
            default_profile: if origin.in_channel {
                "messaging"
            } else {
                "full"
            },
        }
    }
}

/// Why a tool is not offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    pub layer: String,
    pub reason: String,
}

#[derive(Debug, Clone)]
pub struct Verdict<'r> {
    pub tool: &'r ToolDef,
    pub removed: Option<Removal>,
    /// Offered, and its calls wait for the owner's approval (the agent's
    /// `ask` names it).
    pub asks: bool,
}

/// The outcome for every tool of the registry, in registry order.
#[derive(Debug, Clone)]
pub struct Resolution<'r> {
    pub profile: String,
    pub verdicts: Vec<Verdict<'r>>,
}

impl<'r> Resolution<'r> {
    pub fn offered(&self) -> Vec<&'r ToolDef> {
        self.verdicts
            .iter()
            .filter(|v| v.removed.is_none())
            .map(|v| v.tool)
            .collect()
    }

    /// Whether a call of the offered tool `name` waits for the owner's
    /// approval.
    pub fn asks(&self, name: &str) -> bool {
        self.verdicts.iter().any(|v| v.tool.name == name && v.asks)
    }

    /// When no tool is left: the layer that removed the most, as a sentence.
    pub fn why_none(&self) -> Option<String> {
        if self.verdicts.iter().any(|v| v.removed.is_none()) {
            return None;
        }
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for r in self.verdicts.iter().filter_map(|v| v.removed.as_ref()) {
            match counts.iter_mut().find(|(l, _)| *l == r.layer) {
                Some((_, n)) => *n += 1,
                None => counts.push((&r.layer, 1)),
            }
        }
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        Some(match counts.first() {
            Some((layer, n)) => format!(
                "no tool is offered: the {layer} layer removed {n} of {}",
                self.verdicts.len()
            ),
            None => "no tool is offered: the registry is empty".into(),
        })
    }
}

/// Runs the pipeline over every tool of `registry`.
pub fn resolve<'r>(
    registry: &'r ToolRegistry,
    policy: &PolicySettings,
    input: &PolicyInput<'_>,
) -> Resolution<'r> {
    let agent_layer = &input.agent.tools;
    // The profile comes from the agent, else [tools], else the default for
    // this kind of chat; the layer that sets it adds its allow to it.
    let (profile, additions, agent_has_profile, global_has_profile) =
        match (&agent_layer.profile, &policy.global.profile) {
            (Some(p), _) => (p.clone(), agent_layer.allow.clone(), true, false),
            (None, Some(p)) => (p.clone(), policy.global.allow.clone(), false, true),
            (None, None) => (input.default_profile.to_string(), Vec::new(), false, false),
        };
    let mut layers = vec![Compiled::new(
        format!("profile `{profile}`"),
        &ToolLayer {
            profile: Some(profile.clone()),
            allow: additions,
            deny: Vec::new(),
        },
    )];
    if let Some(model) = input.model {
        for key in [model.provider.clone(), model.label()] {
            if let Some(layer) = policy.by_provider.get(&key) {
                layers.push(Compiled::new(format!("provider `{key}`"), layer));
            }
        }
    }
    let without_profile = |layer: &ToolLayer, consumed: bool| ToolLayer {
        profile: None,
        allow: if consumed {
            Vec::new()
        } else {
            layer.allow.clone()
        },
        deny: layer.deny.clone(),
    };
    layers.push(Compiled::new(
        "global [tools]".into(),
        &without_profile(&policy.global, global_has_profile),
    ));
    layers.push(Compiled::new(
        format!("agent `{}`", input.agent.id),
        &without_profile(agent_layer, agent_has_profile),
    ));
    for layer in input.channel {
        layers.push(Compiled::new("channel/group".into(), layer));
    }
    for layer in input.role {
        layers.push(Compiled::new("role".into(), layer));
    }
    for layer in input.sender {
        layers.push(Compiled::new("sender".into(), layer));
    }
    let sandboxed = match policy.sandbox_mode {
        SandboxMode::Off => false,
        SandboxMode::NonMain => !input.main_session,
        SandboxMode::All => true,
    };
    if sandboxed {
        layers.push(Compiled::new("sandbox".into(), &policy.sandbox));
    }
    if let Some(layer) = input.subagent {
        layers.push(Compiled::new(
            "sub-agent [tools.subagents]".into(),
            &policy.subagents,
        ));
        layers.push(Compiled::new("sub-agent spawn".into(), layer));
    }

    // The chat's own allow lists: what lifts the data boundary's removals.
    let named_by_chat = ToolPatterns::new(
        &input
            .channel
            .iter()
            .chain(input.role)
            .chain(input.sender)
            .flat_map(|l| l.allow.iter().cloned())
            .collect::<Vec<_>>(),
    );
    let ask = ToolPatterns::new(&input.agent.ask);
    let mut verdicts: Vec<Verdict<'r>> = registry
        .all()
        .iter()
        .map(|tool| {
            let facts = ToolFacts::of(tool);
            let removed = remove(tool, &facts, &layers, input.owner).or_else(|| {
                (!input.owner)
                    .then(|| boundary(tool, &facts, input.agent.memory, &named_by_chat))
                    .flatten()
                    .map(|reason| Removal {
                        layer: BOUNDARY.into(),
                        reason,
                    })
            });
            let asks = removed.is_none() && ask.first_match(&facts).is_some();
            Verdict {
                tool,
                removed,
                asks,
            }
        })
        .collect();
    // apply_patch writes files: it is offered only where write is. Every
    // pattern that names write already names it (`pattern.rs`); this covers
    // the rest, such as an allow list that names apply_patch but not write.
    let write_removed = verdicts
        .iter()
        .find(|v| v.tool.name == "write")
        .and_then(|v| v.removed.clone());
    if let Some(w) = write_removed
        && let Some(v) = verdicts.iter_mut().find(|v| v.tool.name == "apply_patch")
        && v.removed.is_none()
    {
        v.removed = Some(Removal {
            layer: w.layer,
            reason: "follows `write`, which this layer removed".into(),
        });
        v.asks = false;
    }
    Resolution { profile, verdicts }
}

/// The layer name of the data boundary's removals.
pub const BOUNDARY: &str = "data boundary";

/// The data boundary (SPEC §8.3) for a turn that is not the owner's: why
/// `tool` is removed, if it is. Beside the policy, whatever the profiles
/// say:
///
/// - the memory tools, when the agent's memory is the owner's
///   (`memory = "owner"`, the default): the owner's notes are never
///   searched or read for anyone else;
/// - `group:runtime` (`exec`, `process`), unless the chat's own layers
///   (the group's, a guild role's, the sender's, the DM peer's) name it in `allow` — by
///   name or group, never through a glob: a stranger reaches the owner's
///   machine only where the owner said so for that chat;
/// - MCP and plugin tools, on the same terms: they act with the owner's
///   accounts and files.
pub fn boundary(
    tool: &ToolDef,
    facts: &ToolFacts,
    memory: MemoryScope,
    named_by_chat: &ToolPatterns,
) -> Option<String> {
    let in_group = |g: &str| tool.groups.iter().any(|t| t == g);
    if in_group("memory") && memory == MemoryScope::Owner {
        return Some(
            "the agent's memory is the owner's (memory = \"owner\"); only the owner's chats search or read it".into(),
        );
    }
    if named_by_chat.names(facts) {
        return None;
    }
    if in_group("runtime") {
        return Some("runs commands on the owner's machine: offered to a chat that is not the owner's only when its own tools.allow names it (the group's, a role's, the sender's or the DM peer's)".into());
    }
    if tool.source != super::ToolSource::Core {
        return Some("an MCP or plugin tool acts for the owner: offered to a chat that is not the owner's only when its own tools.allow names it (by name, plugin id, mcp:<server> or group:plugins)".into());
    }
    None
}

fn remove(tool: &ToolDef, facts: &ToolFacts, layers: &[Compiled], owner: bool) -> Option<Removal> {
    if tool.flags.optional && !layers.iter().any(|l| l.pass.names_on_purpose(facts)) {
        return Some(Removal {
            layer: "optional".into(),
            reason: "optional tool: offered only when an allow list names it, its plugin id or group:plugins".into(),
        });
    }
    for layer in layers {
        if let Some(reason) = layer.reject(facts) {
            return Some(Removal {
                layer: layer.name.clone(),
                reason,
            });
        }
    }
    if tool.flags.owner_only && !owner {
        return Some(Removal {
            layer: "owner-only".into(),
            reason: "only the owner may use it".into(),
        });
    }
    None
}
