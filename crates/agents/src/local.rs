//! Local mode: an in-memory library seeded with the built-ins.

use crate::builtin::{builtin_agents, builtin_skills};
use crate::store::{InMemoryAgentStore, InMemorySkillStore};

/// Seeds every built-in agent (GLOBAL version 1, active) into `agents` and every built-in skill
/// (GLOBAL revision 1, verified) into `skills`.
pub fn seed_builtins(agents: &InMemoryAgentStore, skills: &InMemorySkillStore) {
    for agent in builtin_agents() {
        agents.seed(vec![agent.seed_row()], true);
    }
    for skill in builtin_skills() {
        let (row, revision) = skill.seed();
        skills.seed(row, vec![revision]);
    }
}
