//! Tool-key rules: the implementer rule, the agent-run rule, `mcp`, knowledge tools, persona
//! bounding and the canonical capabilities.

use std::collections::BTreeSet;

use auto_swe_agents::{
    Capability, ToolGrant, agent_run_workspace_tools, implementer_workspace_tools,
    is_known_tool_key, knowledge_tools, mcp_enabled, persona_mcp_binding, persona_tool_keys,
    tool_capabilities,
};

fn keys(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

const ALL: &[&str] = &["readFile", "writeFile", "listDirectory", "bash"];
const READ: &[&str] = &["readFile", "listDirectory"];

#[test]
fn implementer_rule() {
    let cases: Vec<(Option<&[&str]>, &[&str])> = vec![
        (None, ALL),
        (Some(&[]), ALL),
        (Some(&["mcp"]), ALL),
        (Some(&["searchKnowledge"]), ALL),
        (Some(&["readFile"]), &["readFile"]),
        (Some(&["bash", "readFile", "mcp"]), &["readFile", "bash"]),
    ];
    for (input, expected) in cases {
        let owned = input.map(keys);
        assert_eq!(
            implementer_workspace_tools(owned.as_deref()),
            keys(expected),
            "{input:?}"
        );
    }
}

#[test]
fn agent_run_rule() {
    let cases: Vec<(Option<&[&str]>, &[&str])> = vec![
        (None, READ),
        (Some(&[]), READ),
        (Some(&["mcp"]), READ),
        (Some(&["writeFile"]), &["writeFile"]),
        (Some(&["bash", "listDirectory"]), &["listDirectory", "bash"]),
    ];
    for (input, expected) in cases {
        let owned = input.map(keys);
        assert_eq!(
            agent_run_workspace_tools(owned.as_deref()),
            keys(expected),
            "{input:?}"
        );
    }
}

#[test]
fn mcp_and_knowledge_keys() {
    let cases: Vec<(Option<&[&str]>, bool, &[&str])> = vec![
        (None, true, &[]),
        (Some(&[]), true, &[]),
        (Some(&["readFile"]), false, &[]),
        (Some(&["readFile", "mcp"]), true, &[]),
        (
            Some(&["searchKnowledge", "submitLearning"]),
            false,
            &["searchKnowledge", "submitLearning"],
        ),
    ];
    for (input, mcp, knowledge) in cases {
        let owned = input.map(keys);
        assert_eq!(mcp_enabled(owned.as_deref()), mcp, "{input:?}");
        assert_eq!(
            knowledge_tools(owned.as_deref()),
            keys(knowledge),
            "{input:?}"
        );
    }
    for key in [
        "readFile",
        "writeFile",
        "listDirectory",
        "bash",
        "mcp",
        "searchKnowledge",
    ] {
        assert!(is_known_tool_key(key), "{key}");
    }
    assert!(!is_known_tool_key("rm"));
}

#[test]
fn persona_tools_are_the_intersection_with_a_workspace_fallback() {
    let cases: Vec<(Option<&[&str]>, Option<&[&str]>, Option<&[&str]>)> = vec![
        (None, None, None),
        (None, Some(&["readFile"]), Some(&["readFile"])),
        (Some(&["bash"]), None, Some(&["bash"])),
        (
            Some(&[]),
            Some(&["readFile", "bash"]),
            Some(&["readFile", "bash"]),
        ),
        // A persona can narrow, never widen.
        (
            Some(&["readFile", "bash"]),
            Some(&["readFile", "writeFile"]),
            Some(&["readFile"]),
        ),
        // Removing bash or mcp from the implementer removes it from the persona.
        (
            Some(&["bash", "mcp", "readFile"]),
            Some(&["readFile", "writeFile"]),
            Some(&["readFile"]),
        ),
        (
            Some(&["readFile", "mcp"]),
            Some(&["readFile", "mcp"]),
            Some(&["readFile", "mcp"]),
        ),
        // No workspace tool left: the implementer's workspace tools.
        (
            Some(&["bash"]),
            Some(&["readFile", "writeFile"]),
            Some(&["readFile", "writeFile"]),
        ),
        (
            Some(&["bash", "mcp"]),
            Some(&["readFile", "mcp"]),
            Some(&["readFile", "mcp"]),
        ),
        // The implementer's list names no workspace tool (all four for it).
        (Some(&["mcp"]), Some(&["mcp"]), Some(ALL_PLUS_MCP)),
    ];
    for (persona, implementer, expected) in cases {
        let p = persona.map(keys);
        let i = implementer.map(keys);
        assert_eq!(
            persona_tool_keys(p.as_deref(), i.as_deref()),
            expected.map(keys),
            "{persona:?} ∩ {implementer:?}"
        );
    }
}

const ALL_PLUS_MCP: &[&str] = &["readFile", "writeFile", "listDirectory", "bash", "mcp"];

#[test]
fn persona_mcp_binding_rules() {
    // (persona conn, persona keys, implementer conn, implementer keys) -> (conn, from implementer)
    let cases: Vec<(
        Option<&str>,
        Option<&[&str]>,
        Option<&str>,
        Option<&[&str]>,
        Option<(&str, bool)>,
    )> = vec![
        (None, None, Some("imp"), None, Some(("imp", true))),
        (Some("own"), None, Some("imp"), None, Some(("own", false))),
        (None, Some(&["readFile"]), Some("imp"), None, None),
        (None, None, Some("imp"), Some(&["readFile"]), None),
        (
            None,
            Some(&["mcp", "readFile"]),
            Some("imp"),
            Some(&["readFile", "mcp"]),
            Some(("imp", true)),
        ),
        (Some("own"), Some(&["mcp"]), None, Some(&["bash"]), None),
        (None, None, None, None, None),
    ];
    for (pc, pk, ic, ik, expected) in cases {
        let pk = pk.map(keys);
        let ik = ik.map(keys);
        let got = persona_mcp_binding(pc, pk.as_deref(), ic, ik.as_deref());
        assert_eq!(
            got.as_ref()
                .map(|m| (m.connection_id.as_str(), m.from_implementer)),
            expected,
            "{pc:?} {pk:?} {ic:?} {ik:?}"
        );
    }
}

#[test]
fn capability_mapping_under_both_grants() {
    use Capability::{Read, Search, Shell, Write};
    let all: BTreeSet<Capability> = [Read, Search, Write, Shell].into();
    let read: BTreeSet<Capability> = [Read, Search].into();
    let cases: Vec<(Option<&[&str]>, ToolGrant, BTreeSet<Capability>)> = vec![
        (None, ToolGrant::Implementer, all.clone()),
        (Some(&[]), ToolGrant::Implementer, all.clone()),
        (Some(&["mcp"]), ToolGrant::Implementer, all.clone()),
        (Some(&["writeFile"]), ToolGrant::Implementer, [Write].into()),
        (None, ToolGrant::Exact, read.clone()),
        (Some(&[]), ToolGrant::Exact, BTreeSet::new()),
        (Some(&["mcp"]), ToolGrant::Exact, BTreeSet::new()),
        (Some(&["listDirectory"]), ToolGrant::Exact, read),
        (Some(&["bash"]), ToolGrant::Exact, [Shell].into()),
        (
            Some(&["readFile", "writeFile", "bash"]),
            ToolGrant::Exact,
            all,
        ),
    ];
    for (input, grant, expected) in cases {
        let owned = input.map(keys);
        assert_eq!(
            tool_capabilities(owned.as_deref(), grant),
            expected,
            "{input:?} {grant:?}"
        );
    }
}
