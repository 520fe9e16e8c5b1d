//! [`DisplayFilter`]: the streamed text of a text-format reply, minus its
//! tool-call markup, so clients show prose while the calls are parsed from
//! the complete reply. Text that might start a call tag is held back until
//! it is clear; nothing is lost if it turns out to be prose.

use super::{HERMES, MCP, QWEN_FUNCTION, scan};
use crate::llm::ToolSpec;

/// Longest opening tag held back while its attributes stream in.
const MAX_HELD_TAG: usize = 4096;

pub struct DisplayFilter {
    pending: String,
    /// The element being hidden: its name, and where to look for its close.
    inside: Option<(String, usize)>,
    names: Vec<String>,
}

enum Class {
    /// A call tag: hide through `</name>` (or only the tag if self-closing).
    Call {
        name: String,
        end: usize,
        self_closing: bool,
    },
    /// Might become a call tag; wait for more text.
    Undecided,
    Text,
}

impl DisplayFilter {
    pub fn new(tools: &[ToolSpec]) -> Self {
        let mut names = vec![HERMES.to_string(), MCP.to_string()];
        names.extend(tools.iter().map(|t| t.name.clone()));
        Self {
            pending: String::new(),
            inside: None,
            names,
        }
    }

    /// Feeds a streamed piece; returns the text that can be shown now.
    pub fn push(&mut self, delta: &str) -> String {
        self.pending.push_str(delta);
        let mut out = String::new();
        loop {
            if let Some((name, from)) = &self.inside {
                match scan::close_tag(&self.pending, name, *from) {
                    Some((_, end)) => {
                        self.pending.drain(..end);
                        self.inside = None;
                        continue;
                    }
                    None => {
                        // Next time, search from the last `<` (a closing
                        // tag may be arriving in pieces).
                        let from = self.pending.rfind('<').unwrap_or(self.pending.len());
                        self.inside = Some((name.clone(), from));
                        return out;
                    }
                }
            }
            let Some(lt) = self.pending.find('<') else {
                out.push_str(&self.pending);
                self.pending.clear();
                return out;
            };
            out.push_str(&self.pending[..lt]);
            self.pending.drain(..lt);
            match self.classify() {
                Class::Call {
                    name,
                    end,
                    self_closing,
                } => {
                    if self_closing {
                        self.pending.drain(..end);
                    } else {
                        self.inside = Some((name, end));
                    }
                }
                Class::Undecided => return out,
                Class::Text => {
                    out.push('<');
                    self.pending.drain(..1);
                }
            }
        }
    }

    /// The end of the stream: whatever was held back and never became a
    /// complete call is shown.
    pub fn finish(&mut self) -> String {
        self.inside = None;
        std::mem::take(&mut self.pending)
    }

    /// Classifies the pending text, which starts with `<`.
    fn classify(&self) -> Class {
        let p = self.pending.as_str();
        if let Some(rest) = p.strip_prefix(QWEN_FUNCTION) {
            return match rest.find('>') {
                Some(gt) => Class::Call {
                    name: "function".into(),
                    end: QWEN_FUNCTION.len() + gt + 1,
                    self_closing: false,
                },
                None if p.len() < MAX_HELD_TAG => Class::Undecided,
                None => Class::Text,
            };
        }
        if QWEN_FUNCTION.starts_with(p) {
            return Class::Undecided;
        }
        if let Some(tag) = scan::open_tag(p, 0) {
            return if self.names.iter().any(|n| n == tag.name) {
                Class::Call {
                    name: tag.name.to_string(),
                    end: tag.end,
                    self_closing: tag.self_closing,
                }
            } else {
                Class::Text
            };
        }
        let after = &p[1..];
        let name_len = after
            .char_indices()
            .find(|(_, c)| !scan::is_name_char(*c))
            .map_or(after.len(), |(i, _)| i);
        let name = &after[..name_len];
        if name_len == after.len() {
            // The name itself may still be arriving.
            return if self.names.iter().any(|n| n.starts_with(name)) {
                Class::Undecided
            } else {
                Class::Text
            };
        }
        // A call tag whose attributes are still arriving.
        if self.names.iter().any(|n| n == name) && !p.contains('>') && p.len() < MAX_HELD_TAG {
            Class::Undecided
        } else {
            Class::Text
        }
    }
}
