//! The read, launch and steering commands against a reference server (`--server URL`) instead of
//! the local store. The token comes from `AUTO_SWE_TOKEN` or `--token-file`, never from the
//! command line, where other users of the machine could read it in the process list.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::output::{self, Format, Status};

/// The variable holding the API token.
pub(crate) const TOKEN_ENV: &str = "AUTO_SWE_TOKEN";
/// The variable naming the server when `--server` does not.
pub(crate) const SERVER_ENV: &str = "AUTO_SWE_SERVER";

/// Where to send a command instead of the local store.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ServerArgs {
    /// A reference server to use instead of the local store (`AUTO_SWE_SERVER`); `https://`, or
    /// `http://` on loopback only.
    #[arg(long, value_name = "URL")]
    pub(crate) server: Option<String>,
    /// A file holding the server's API token; without it, `AUTO_SWE_TOKEN`.
    #[arg(long, value_name = "PATH")]
    pub(crate) token_file: Option<PathBuf>,
}

/// The server `args` name (or `AUTO_SWE_SERVER`), checked: `https://`, or `http://` on
/// loopback only, with no credentials in it; `None` when none is named.
pub(crate) fn server_url(args: &ServerArgs) -> anyhow::Result<Option<url::Url>> {
    let server = args
        .server
        .clone()
        .or_else(|| std::env::var(SERVER_ENV).ok())
        .filter(|s| !s.is_empty());
    let Some(server) = server.as_deref() else {
        return Ok(None);
    };
    let base = url::Url::parse(server).with_context(|| format!("--server {server}"))?;
    let loopback = match base.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    match base.scheme() {
        "https" => {}
        "http" if loopback => {}
        "http" => anyhow::bail!(
            "--server {server}: the token would cross the network in clear text; use https://"
        ),
        other => anyhow::bail!("--server {server}: {other}:// is not http(s)"),
    }
    if !base.username().is_empty() || base.password().is_some() {
        anyhow::bail!(
            "--server: put no credentials in the URL; use AUTO_SWE_TOKEN or --token-file"
        );
    }
    Ok(Some(base))
}

/// A signed-in client of one server.
pub(crate) struct Remote {
    base: url::Url,
    token: String,
    http: reqwest::Client,
}

impl Remote {
    /// The client `args` ask for, or `None` when they name no server.
    pub(crate) fn from_args(args: &ServerArgs) -> anyhow::Result<Option<Self>> {
        let Some(base) = server_url(args)? else {
            anyhow::ensure!(
                args.token_file.is_none(),
                "--token-file needs --server (or {SERVER_ENV})"
            );
            return Ok(None);
        };
        let token = match &args.token_file {
            Some(path) => std::fs::read_to_string(path)
                .with_context(|| format!("reading the token file {}", path.display()))?,
            None => std::env::var(TOKEN_ENV).unwrap_or_default(),
        };
        let token = token.trim().to_owned();
        if token.is_empty() {
            anyhow::bail!("--server needs a token: set {TOKEN_ENV} or pass --token-file");
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Some(Self { base, token, http }))
    }

    /// Sends a request; a refusal becomes an error naming the server's code and message.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let url = self.base.join(path.trim_start_matches('/'))?;
        let mut request = self.http.request(method, url).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("reaching {}", self.base))?;
        let status = response.status();
        let text = response.text().await?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(value);
        }
        let code = value["error"]["code"].as_str().unwrap_or("HTTP_ERROR");
        let message = value["error"]["message"].as_str().unwrap_or_default();
        let hint = match status {
            StatusCode::UNAUTHORIZED => " (check the token)",
            StatusCode::NOT_FOUND => " (or not yours to see)",
            _ => "",
        };
        anyhow::bail!(
            "the server refused: {message}{hint} ({code}, HTTP {})",
            status.as_u16()
        )
    }

    /// `runs list`.
    pub(crate) async fn list_runs(&self, limit: u32, format: Format) -> anyhow::Result<Status> {
        let page = self
            .call(
                Method::GET,
                &format!("/api/v1/workflow-runs?limit={}", limit.clamp(1, 100)),
                None,
            )
            .await?;
        let runs = page["data"].as_array().cloned().unwrap_or_default();
        if format == Format::Json {
            output::print_json(&json!({ "runs": runs }))?;
            return Ok(Status::Success);
        }
        let mut text = String::new();
        for run in &runs {
            let _ = writeln!(
                text,
                "{}  {:<10} {}",
                run["id"].as_str().unwrap_or("-"),
                run["status"].as_str().unwrap_or("-"),
                run["template"].as_str().unwrap_or("-"),
            );
        }
        if text.is_empty() {
            text.push_str("no runs you may see\n");
        }
        output::print_text(&text)?;
        Ok(Status::Success)
    }

    /// `runs show`.
    pub(crate) async fn show_run(
        &self,
        run: &str,
        traces: bool,
        format: Format,
    ) -> anyhow::Result<Status> {
        let detail = self
            .call(
                Method::GET,
                &format!("/api/v1/workflow-runs/{}", segment(run)),
                None,
            )
            .await?;
        let mut shown = detail["data"].clone();
        if traces {
            let page = self
                .call(
                    Method::GET,
                    &format!("/api/v1/workflow-runs/{}/traces?limit=500", segment(run)),
                    None,
                )
                .await?;
            shown["traces"] = page["data"].clone();
        }
        if format == Format::Json {
            output::print_json(&shown)?;
            return Ok(Status::Success);
        }
        let mut text = format!(
            "run {}  {}\n",
            shown["id"].as_str().unwrap_or(run),
            shown["status"].as_str().unwrap_or("-")
        );
        for step in shown["steps"].as_array().into_iter().flatten() {
            let _ = writeln!(
                text,
                "  {:<24} {}",
                step["nodeId"].as_str().unwrap_or("-"),
                step["status"].as_str().unwrap_or("-")
            );
        }
        for human in shown["humanSteps"].as_array().into_iter().flatten() {
            let _ = writeln!(
                text,
                "  waits on a person at {} ({})",
                human["nodeId"].as_str().unwrap_or("-"),
                human["status"].as_str().unwrap_or("-")
            );
        }
        for trace in shown["traces"].as_array().into_iter().flatten() {
            let _ = writeln!(text, "  trace {trace}");
        }
        output::print_text(&text)?;
        Ok(Status::Success)
    }

    /// `signal`.
    pub(crate) async fn signal(
        &self,
        run: &str,
        name: &str,
        payload: &Value,
    ) -> anyhow::Result<Status> {
        self.call(
            Method::POST,
            &format!(
                "/api/v1/workflow-runs/{}/signals/{}",
                segment(run),
                segment(name)
            ),
            Some(&json!({ "payload": payload })),
        )
        .await?;
        output::print_text(&format!("signal `{name}` sent to run {run}\n"))?;
        Ok(Status::Success)
    }

    /// `approve`, `reject`, `request-changes`, `answer`: the run's pending step at `node`.
    pub(crate) async fn answer(
        &self,
        run: &str,
        node: &str,
        answer: &Value,
    ) -> anyhow::Result<Status> {
        let detail = self
            .call(
                Method::GET,
                &format!("/api/v1/workflow-runs/{}", segment(run)),
                None,
            )
            .await?;
        let steps = detail["data"]["humanSteps"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let Some(step) = steps
            .iter()
            .rev()
            .find(|s| s["nodeId"] == node && s["status"] == "PENDING")
        else {
            let pending: Vec<&str> = steps
                .iter()
                .filter(|s| s["status"] == "PENDING")
                .filter_map(|s| s["nodeId"].as_str())
                .collect();
            anyhow::bail!(
                "run {run} has no pending human step at `{node}` (pending: {})",
                if pending.is_empty() {
                    "none".to_owned()
                } else {
                    pending.join(", ")
                }
            );
        };
        let id = step["id"]
            .as_str()
            .context("the server's human step has no id")?;
        self.call(
            Method::POST,
            &format!("/api/v1/human-steps/{}/respond", segment(id)),
            Some(&json!({ "answer": answer })),
        )
        .await?;
        output::print_text(&format!("answered `{node}` of run {run}\n"))?;
        Ok(Status::Success)
    }

    /// `cancel`.
    pub(crate) async fn cancel(&self, run: &str) -> anyhow::Result<Status> {
        self.call(
            Method::POST,
            &format!("/api/v1/workflow-runs/{}/cancel", segment(run)),
            Some(&json!({})),
        )
        .await?;
        output::print_text(&format!(
            "run {run}: cancel requested; its worker ends it\n"
        ))?;
        Ok(Status::Success)
    }

    /// `templates list`.
    pub(crate) async fn list_templates(&self, format: Format) -> anyhow::Result<Status> {
        let listed = self
            .call(Method::GET, "/api/v1/workflow-templates", None)
            .await?;
        let templates = listed["data"].as_array().cloned().unwrap_or_default();
        if format == Format::Json {
            output::print_json(&json!({ "templates": templates }))?;
            return Ok(Status::Success);
        }
        let mut text = String::new();
        for t in &templates {
            let _ = writeln!(
                text,
                "{}  {:<24} v{}",
                t["id"].as_str().unwrap_or("-"),
                t["name"].as_str().unwrap_or("-"),
                t["runVersion"]
            );
        }
        if text.is_empty() {
            text.push_str("no templates you may use\n");
        }
        output::print_text(&text)?;
        Ok(Status::Success)
    }

    /// `run --server`: a work request (`{template, repository, ticket, model?, tier?}`: a built-in
    /// template on one of the server's repository connections); with `follow`, waits until the
    /// run ends or waits for a person.
    pub(crate) async fn launch(
        &self,
        request: &Value,
        follow: bool,
        format: Format,
    ) -> anyhow::Result<Status> {
        let accepted = self
            .call(Method::POST, "/api/v1/work-requests", Some(request))
            .await?;
        let run = accepted["data"]["runId"]
            .as_str()
            .context("the server named no run")?
            .to_owned();
        let mut status = accepted["data"]["status"]
            .as_str()
            .unwrap_or("PENDING")
            .to_owned();
        if follow {
            let started = Instant::now();
            while !matches!(
                status.as_str(),
                "SUCCESS" | "FAILED" | "CANCELLED" | "TIMED_OUT" | "WAITING"
            ) {
                if started.elapsed() > Duration::from_secs(24 * 3600) {
                    break;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                let detail = self
                    .call(
                        Method::GET,
                        &format!("/api/v1/workflow-runs/{}", segment(&run)),
                        None,
                    )
                    .await?;
                detail["data"]["status"]
                    .as_str()
                    .unwrap_or("-")
                    .clone_into(&mut status);
            }
        }
        if format == Format::Json {
            output::print_json(&json!({ "runId": run, "status": status }))?;
        } else {
            output::print_text(&format!("run {run}  {status}\n"))?;
        }
        Ok(match status.as_str() {
            "FAILED" | "CANCELLED" | "TIMED_OUT" => Status::Problems,
            _ => Status::Success,
        })
    }
}

/// `text` as one URL path segment (so an id cannot climb to another route).
fn segment(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
        .replace('.', "%2E")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(server: &str) -> ServerArgs {
        ServerArgs {
            server: Some(server.to_owned()),
            token_file: None,
        }
    }

    #[test]
    fn a_token_never_crosses_the_network_in_clear_text() {
        for refused in [
            "http://auto-swe.example.test",
            "http://10.0.0.8:8080",
            "ftp://127.0.0.1",
            "https://user:pw@auto-swe.example.test",
            "not a url",
        ] {
            assert!(Remote::from_args(&args(refused)).is_err(), "{refused}");
        }
    }

    #[test]
    fn ids_stay_one_path_segment() {
        assert_eq!(segment("../../admin"), "%2E%2E%2F%2E%2E%2Fadmin");
        assert_eq!(segment("a b?c#d"), "a%20b%3Fc%23d");
    }
}
