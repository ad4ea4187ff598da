//! Skills: the model, the library's write rules, rendering for prompts and the `SKILL.md` reader.

pub(crate) mod library;
pub(crate) mod model;
pub(crate) mod render;
pub(crate) mod skill_md;
