//! The one place a skill becomes prompt text: the L1 menu entry, the inline block and what
//! `loadSkill` returns. Imported text carries its provenance label on every one of them.

use crate::skills::model::{PromptSkill, SkillProvenance};

/// Heading of the skill menu.
pub const SKILL_MENU_HEADING: &str = "## Available Skills";
/// Name of the tool that loads a skill's full text.
pub const LOAD_SKILL_TOOL: &str = "loadSkill";

/// Where a skill's text is going.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkillPlacement {
    /// One `- **name**: description` line of the L1 menu.
    MenuEntry,
    /// The whole text placed in a system prompt.
    Inline,
    /// The text the `loadSkill` tool returns.
    LoadSkill,
}

fn label(provenance: &SkillProvenance, third_party: bool) -> String {
    let suffix = if third_party {
        " — third-party text"
    } else {
        ""
    };
    match &provenance.repository {
        Some(repo) => format!("[external: {repo}@{}{suffix}]", provenance.sha7()),
        None => format!("[external@{}{suffix}]", provenance.sha7()),
    }
}

/// Renders one skill for one placement. Every path from a skill's text to a model goes through
/// here, so imported text is never shown without its label.
#[must_use]
pub fn render_skill(skill: &PromptSkill, placement: SkillPlacement) -> String {
    match placement {
        SkillPlacement::MenuEntry => {
            let description = one_line(&skill.description);
            match &skill.provenance {
                Some(p) => format!("- **{}**: {} {description}", skill.name, label(p, false)),
                None => format!("- **{}**: {description}", skill.name),
            }
        }
        SkillPlacement::Inline | SkillPlacement::LoadSkill => match &skill.provenance {
            Some(p) => format!("{}\n{}", label(p, true), skill.prompt_text),
            None => skill.prompt_text.clone(),
        },
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The L1 menu appended to a tool-using agent's system prompt, or `None` without skills.
#[must_use]
pub fn skills_menu(skills: &[PromptSkill]) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    let mut out = format!(
        "{SKILL_MENU_HEADING}\nUse the `{LOAD_SKILL_TOOL}` tool to load the full guidance for a skill before you apply it.\n\n"
    );
    let entries: Vec<String> = skills
        .iter()
        .map(|s| render_skill(s, SkillPlacement::MenuEntry))
        .collect();
    out.push_str(&entries.join("\n"));
    out.push('\n');
    Some(out)
}

/// Every skill's text inline, separated by a blank line, or `None` without skills (for agents
/// that get their skills directly rather than through `loadSkill`).
#[must_use]
pub fn skills_inline(skills: &[PromptSkill]) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    Some(
        skills
            .iter()
            .map(|s| render_skill(s, SkillPlacement::Inline))
            .collect::<Vec<_>>()
            .join("\n\n"),
    )
}

/// What `loadSkill({name})` returns: the named skill's text, or `None` when the agent has no
/// skill of that name.
#[must_use]
pub fn load_skill(skills: &[PromptSkill], name: &str) -> Option<String> {
    skills
        .iter()
        .find(|s| s.name == name)
        .map(|s| render_skill(s, SkillPlacement::LoadSkill))
}
