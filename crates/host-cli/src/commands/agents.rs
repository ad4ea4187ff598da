//! `auto-swe agents list|show` and `auto-swe skills list|show`: the agent library as local mode
//! sees it — the built-in agents and skills.

use std::fmt::Write as _;

use auto_swe_agents::{
    BuiltinAgent, BuiltinSkill, builtin_agent, builtin_agents, builtin_skill, builtin_skills,
};
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::output::{Format, Status};

/// Arguments of `auto-swe agents`.
#[derive(Debug, Args)]
pub(crate) struct AgentsArgs {
    #[command(subcommand)]
    command: AgentsCommand,
}

#[derive(Debug, Subcommand)]
enum AgentsCommand {
    /// List the agents.
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Show one agent, with its prompt.
    Show {
        /// The agent key.
        key: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
}

/// Arguments of `auto-swe skills`.
#[derive(Debug, Args)]
pub(crate) struct SkillsArgs {
    #[command(subcommand)]
    command: SkillsCommand,
}

#[derive(Debug, Subcommand)]
enum SkillsCommand {
    /// List the skills.
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Show one skill, with its text.
    Show {
        /// The skill name.
        name: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
}

/// The wire form of an agent.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct AgentOutput {
    key: &'static str,
    kind: &'static str,
    /// The model it runs on, its own or its parent's.
    model: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    inherits_model_from: Option<&'static str>,
    used_by: &'static str,
    origin: &'static str,
    skills: &'static [&'static str],
    tool_keys: Option<&'static [&'static str]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_prompt: Option<&'static str>,
}

fn model_of(agent: &BuiltinAgent) -> &'static str {
    let mut current = agent;
    for _ in 0..auto_swe_agents::MAX_INHERITANCE_DEPTH {
        if let Some(model) = current.model_spec {
            return model;
        }
        match current.inherits_model_from.and_then(builtin_agent) {
            Some(parent) => current = parent,
            None => break,
        }
    }
    "(unresolved)"
}

fn agent_output(agent: &'static BuiltinAgent, with_prompt: bool) -> AgentOutput {
    AgentOutput {
        key: agent.key,
        kind: if agent.is_model_backed() {
            "model-backed"
        } else {
            "persona"
        },
        model: model_of(agent),
        inherits_model_from: agent.inherits_model_from,
        used_by: agent.used_by,
        origin: auto_swe_agents::BUILTIN_ORIGIN,
        skills: agent.skills,
        tool_keys: agent.tool_keys,
        system_prompt: with_prompt.then_some(agent.prompt),
    }
}

fn tool_keys_text(keys: Option<&[&str]>) -> String {
    match keys {
        None => "(no opinion)".to_owned(),
        Some([]) => "[]".to_owned(),
        Some(keys) => keys.join(", "),
    }
}

/// Runs `auto-swe agents …`.
pub(crate) fn run_agents(args: &AgentsArgs) -> anyhow::Result<Status> {
    match &args.command {
        AgentsCommand::List { format } => {
            let agents: Vec<AgentOutput> = builtin_agents()
                .iter()
                .map(|a| agent_output(a, false))
                .collect();
            match format {
                Format::Json => {
                    crate::output::print_json(&serde_json::json!({ "agents": agents }))?;
                }
                Format::Text => {
                    let mut text = String::new();
                    for a in &agents {
                        let via = a
                            .inherits_model_from
                            .map(|p| format!(" (via {p})"))
                            .unwrap_or_default();
                        let _ = writeln!(text, "{:<24} {:<13} {}{via}", a.key, a.kind, a.model);
                    }
                    crate::output::print_text(&text)?;
                }
            }
        }
        AgentsCommand::Show { key, format } => {
            let agent = builtin_agent(key)
                .ok_or_else(|| anyhow::anyhow!("no agent `{key}` (see `auto-swe agents list`)"))?;
            let out = agent_output(agent, true);
            match format {
                Format::Json => crate::output::print_json(&out)?,
                Format::Text => {
                    let mut text = String::new();
                    let _ = writeln!(text, "key:       {}", out.key);
                    let _ = writeln!(text, "kind:      {}", out.kind);
                    let _ = writeln!(text, "model:     {}", out.model);
                    if let Some(parent) = out.inherits_model_from {
                        let _ = writeln!(text, "inherits:  {parent}");
                    }
                    let _ = writeln!(text, "used by:   {}", out.used_by);
                    let _ = writeln!(text, "origin:    {}", out.origin);
                    let _ = writeln!(text, "skills:    {}", out.skills.join(", "));
                    let _ = writeln!(text, "tool keys: {}", tool_keys_text(out.tool_keys));
                    let _ = writeln!(text, "\n{}", agent.prompt);
                    crate::output::print_text(&text)?;
                }
            }
        }
    }
    Ok(Status::Success)
}

/// The wire form of a skill.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SkillOutput {
    name: &'static str,
    category: &'static str,
    description: &'static str,
    built_in: bool,
    verified: bool,
    revision: u32,
    used_by: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_text: Option<&'static str>,
}

fn skill_output(skill: &'static BuiltinSkill, with_text: bool) -> SkillOutput {
    SkillOutput {
        name: skill.name,
        category: skill.category,
        description: skill.description,
        built_in: true,
        verified: true,
        revision: 1,
        used_by: builtin_agents()
            .iter()
            .filter(|a| a.skills.contains(&skill.name))
            .map(|a| a.key)
            .collect(),
        prompt_text: with_text.then_some(skill.text),
    }
}

/// Runs `auto-swe skills …`.
pub(crate) fn run_skills(args: &SkillsArgs) -> anyhow::Result<Status> {
    match &args.command {
        SkillsCommand::List { format } => {
            let skills: Vec<SkillOutput> = builtin_skills()
                .iter()
                .map(|s| skill_output(s, false))
                .collect();
            match format {
                Format::Json => {
                    crate::output::print_json(&serde_json::json!({ "skills": skills }))?;
                }
                Format::Text => {
                    let mut text = String::new();
                    for s in &skills {
                        let _ =
                            writeln!(text, "{:<32} {:<20} {}", s.name, s.category, s.description);
                    }
                    crate::output::print_text(&text)?;
                }
            }
        }
        SkillsCommand::Show { name, format } => {
            let skill = builtin_skill(name)
                .ok_or_else(|| anyhow::anyhow!("no skill `{name}` (see `auto-swe skills list`)"))?;
            let out = skill_output(skill, true);
            match format {
                Format::Json => crate::output::print_json(&out)?,
                Format::Text => {
                    let mut text = String::new();
                    let _ = writeln!(text, "name:        {}", out.name);
                    let _ = writeln!(text, "category:    {}", out.category);
                    let _ = writeln!(text, "description: {}", out.description);
                    let _ = writeln!(text, "revision:    {} (built in, verified)", out.revision);
                    let _ = writeln!(text, "used by:     {}", out.used_by.join(", "));
                    let _ = writeln!(text, "\n{}", skill.text);
                    crate::output::print_text(&text)?;
                }
            }
        }
    }
    Ok(Status::Success)
}
