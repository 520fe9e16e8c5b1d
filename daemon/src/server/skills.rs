//! `pincer.v1.Skills`: the skills of an agent's workspace and whether its
//! prompt lists them (`pincer skills list`). Its one conversion is in
//! `pb`, at the bottom.

use tonic::{Request, Response, Status};

use super::State;
use crate::config::PromptMode;
use crate::context::skills;
use crate::llm::windows::ContextWindow;

pub struct SkillsService {
    state: State,
}

impl SkillsService {
    pub fn new(state: State) -> Self {
        Self { state }
    }
}

#[tonic::async_trait]
impl pb::skills_server::Skills for SkillsService {
    async fn list(
        &self,
        request: Request<pb::ListSkillsRequest>,
    ) -> Result<Response<pb::ListSkillsResponse>, Status> {
        let id = self.state.hub.agent_id(&request.into_inner().agent)?;
        let config = self.state.hub.config();
        let Some(agent) = config.agent(&id).cloned() else {
            return Err(Status::not_found(format!("no agent `{id}`")));
        };
        let workspace = agent.workspace.clone();
        let found = tokio::task::spawn_blocking(move || skills::discover(&workspace))
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        let window = agent.context_window();
        let mode = agent.prompt_mode.resolve(window, false);
        let note = if mode != PromptMode::Full {
            format!(
                "not listed in the prompt: agent `{id}` runs with prompt_mode {} (set prompt_mode = \"full\")",
                mode.as_str()
            )
        } else {
            String::new()
        };
        Ok(Response::new(pb::ListSkillsResponse {
            agent: id,
            workspace: agent.workspace.display().to_string(),
            listed_in_prompt: note.is_empty() && !found.is_empty(),
            note,
            skills: found.into_iter().map(pb::Skill::from).collect(),
        }))
    }
}

/// The Skills service's wire types (`pincer.v1` re-exported, so the
/// handler names its messages `pb::X`) and its one conversion. Our `Skill`
/// is named by its path: imported, it would hide the message of that name.
mod pb {
    pub(super) use pincer_proto::v1::*;

    use pincer_proto::v1 as pb;

    impl From<crate::context::skills::Skill> for pb::Skill {
        fn from(s: crate::context::skills::Skill) -> Self {
            pb::Skill {
                name: s.name,
                description: s.description,
                path: s.path,
                problem: s.problem.unwrap_or_default(),
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::context::skills::Skill;

        #[test]
        fn a_skill_keeps_its_fields() {
            let skill = pb::Skill::from(Skill {
                name: "deploy".into(),
                description: "ships it".into(),
                path: "skills/deploy/SKILL.md".into(),
                problem: None,
            });
            assert_eq!(
                (skill.name.as_str(), skill.description.as_str()),
                ("deploy", "ships it")
            );
            assert_eq!(skill.path, "skills/deploy/SKILL.md");
            assert_eq!(skill.problem, "");
            let broken = pb::Skill::from(Skill {
                name: "half".into(),
                description: String::new(),
                path: "skills/half/SKILL.md".into(),
                problem: Some("no description".into()),
            });
            assert_eq!(broken.problem, "no description");
        }
    }
}
