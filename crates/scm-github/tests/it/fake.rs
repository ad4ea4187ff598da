//! A fake GitHub on loopback: a wiremock server answering the REST calls this crate makes, from
//! hand-written fixtures shaped like GitHub's documented examples, with the state a real host
//! keeps (pull requests, check runs, tokens) and the checks a real host makes (an App JWT signed
//! by the App's key, tokens it minted). Every request is kept for the tests to inspect.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use auto_swe_scm_github::AppClaims;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate, matchers::any};

/// A fixture file's JSON.
pub(crate) fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) authorization: Option<String>,
    pub(crate) body: Value,
}

/// A token the fake minted.
#[derive(Debug, Clone)]
pub(crate) struct Minted {
    pub(crate) token: String,
    pub(crate) body: Value,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) app_id: u64,
    pub(crate) public_key: String,
    pub(crate) personal_token: Option<String>,
    pub(crate) installation: Option<u64>,
    pub(crate) mint_status: Option<u16>,
    pub(crate) token_lifetime: i64,
    pub(crate) revoked: bool,
    pub(crate) minted: Vec<Minted>,
    pub(crate) jwts: Vec<AppClaims>,
    pub(crate) pulls: Vec<Value>,
    pub(crate) check_runs: HashMap<String, Vec<Value>>,
    pub(crate) suites: HashMap<String, Vec<Value>>,
    pub(crate) job_logs: HashMap<u64, String>,
    pub(crate) own_checks: Vec<Value>,
    pub(crate) labels: HashMap<u64, Vec<String>>,
    pub(crate) comments: Vec<(u64, String)>,
    pub(crate) queued: VecDeque<(String, ResponseTemplate)>,
    pub(crate) seen: Vec<Seen>,
    pub(crate) remote: PathBuf,
    pub(crate) base: String,
}

/// The fake's state, shared with the server.
#[derive(Clone)]
pub(crate) struct FakeGitHub {
    pub(crate) state: Arc<Mutex<State>>,
}

fn rfc3339(at: SystemTime) -> String {
    let secs = at.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

fn json_reply(status: u16, body: &Value) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(body)
}

fn message(status: u16, text: &str) -> ResponseTemplate {
    json_reply(
        status,
        &json!({ "message": text, "documentation_url": "https://docs.github.com/rest" }),
    )
}

impl FakeGitHub {
    /// Starts the fake; `remote` is the bare repository its git URLs lead to.
    pub(crate) async fn start(
        app_id: u64,
        public_key: &str,
        remote: PathBuf,
    ) -> (MockServer, Self) {
        let server = MockServer::start().await;
        let fake = Self {
            state: Arc::new(Mutex::new(State {
                app_id,
                public_key: public_key.to_owned(),
                installation: Some(4242),
                token_lifetime: 3_600,
                remote,
                base: server.uri(),
                ..State::default()
            })),
        };
        Mock::given(any())
            .respond_with(fake.clone())
            .mount(&server)
            .await;
        (server, fake)
    }

    /// Answers the next request whose path starts with `path_prefix` with `reply`, once.
    pub(crate) fn queue(&self, path_prefix: &str, reply: ResponseTemplate) {
        self.with(|s| s.queued.push_back((path_prefix.to_owned(), reply)));
    }

    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.lock().unwrap())
    }

    /// Requests seen whose method and path match.
    pub(crate) fn seen(&self, method: &str, path_contains: &str) -> Vec<Seen> {
        self.with(|s| {
            s.seen
                .iter()
                .filter(|r| r.method == method && r.path.contains(path_contains))
                .cloned()
                .collect()
        })
    }

    /// Sets the check runs (and one suite holding them) GitHub reports for `sha`.
    pub(crate) fn set_checks(&self, sha: &str, runs: &[(&str, &str, Option<&str>)]) {
        let runs: Vec<Value> = runs
            .iter()
            .enumerate()
            .map(|(i, (name, status, conclusion))| {
                let mut run = fixture("check_run");
                run["id"] = json!(500 + i as u64 + 10 * self.with(|s| s.check_runs.len() as u64));
                run["name"] = json!(name);
                run["head_sha"] = json!(sha);
                run["status"] = json!(status);
                run["conclusion"] = json!(conclusion);
                run
            })
            .collect();
        let all_done = runs.iter().all(|r| r["status"] == "completed");
        let failed = runs.iter().any(|r| {
            !matches!(
                r["conclusion"].as_str(),
                Some("success" | "neutral" | "skipped")
            )
        });
        let mut suite = fixture("check_suite");
        suite["head_sha"] = json!(sha);
        suite["status"] = json!(if all_done { "completed" } else { "in_progress" });
        suite["conclusion"] = if all_done {
            json!(if failed { "failure" } else { "success" })
        } else {
            Value::Null
        };
        suite["latest_check_runs_count"] = json!(runs.len());
        self.with(|s| {
            s.check_runs.insert(sha.to_owned(), runs);
            s.suites.insert(sha.to_owned(), vec![suite]);
        });
    }

    fn head_of(state: &State, branch: &str) -> String {
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&state.remote)
            .args(["rev-parse", &format!("refs/heads/{branch}")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn authorised(state: &mut State, request: &Request, app: bool) -> Result<(), ResponseTemplate> {
        let bearer = request
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_owned);
        let Some(bearer) = bearer else {
            return Err(message(401, "Requires authentication"));
        };
        if app {
            let key = DecodingKey::from_rsa_pem(state.public_key.as_bytes()).unwrap();
            let mut validation = Validation::new(Algorithm::RS256);
            validation.set_required_spec_claims(&["exp", "iat", "iss"]);
            return match jsonwebtoken::decode::<AppClaims>(&bearer, &key, &validation) {
                Ok(data) if data.claims.iss == state.app_id.to_string() => {
                    state.jwts.push(data.claims);
                    Ok(())
                }
                _ => Err(message(401, "A JSON web token could not be decoded")),
            };
        }
        let known = state.minted.iter().any(|m| m.token == bearer)
            || state.personal_token.as_deref() == Some(bearer.as_str());
        if known && !state.revoked {
            Ok(())
        } else {
            Err(message(401, "Bad credentials"))
        }
    }

    #[allow(clippy::too_many_lines, reason = "one fake host's routes")]
    fn route(state: &mut State, request: &Request, path: &str, body: &Value) -> ResponseTemplate {
        let method = request.method.as_str();
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let query: HashMap<String, String> = request
            .url
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        if let ["download", file] = segments.as_slice() {
            if request.headers.contains_key("authorization") {
                return message(400, "a credential was sent to the log store");
            }
            let job: u64 = file
                .trim_start_matches("job-")
                .trim_end_matches(".txt")
                .parse()
                .unwrap_or(0);
            return match state.job_logs.get(&job) {
                Some(log) => ResponseTemplate::new(200).set_body_string(log.clone()),
                None => message(404, "Not Found"),
            };
        }
        let app_call = matches!(
            segments.as_slice(),
            ["app", ..] | ["repos", _, _, "installation"]
        );
        if let Err(refusal) = Self::authorised(state, request, app_call) {
            return refusal;
        }
        match (method, segments.as_slice()) {
            ("GET", ["repos", owner, name, "installation"]) => match state.installation {
                Some(id) => {
                    let mut found = fixture("installation");
                    found["id"] = json!(id);
                    found["account"]["login"] = json!(owner);
                    let _ = name;
                    json_reply(200, &found)
                }
                None => message(404, "Not Found"),
            },
            ("POST", ["app", "installations", id, "access_tokens"]) => {
                if Some(id.parse::<u64>().unwrap_or(0)) != state.installation {
                    return message(404, "Not Found");
                }
                if let Some(status) = state.mint_status {
                    return message(
                        status,
                        "There is at least one repository that does not exist or is not accessible to the parent installation.",
                    );
                }
                let mut token = fixture("access_token");
                // Opaque and of a length no code may assume.
                let value = format!(
                    "ghs_{}x{}",
                    "Z".repeat(7 + state.minted.len() * 13),
                    state.minted.len()
                );
                token["token"] = json!(value);
                token["expires_at"] = json!(rfc3339(
                    SystemTime::now() + Duration::from_secs(state.token_lifetime.max(0) as u64)
                ));
                token["permissions"] = body["permissions"].clone();
                state.minted.push(Minted {
                    token: value,
                    body: body.clone(),
                });
                json_reply(201, &token)
            }
            ("GET", ["repos", owner, name]) => {
                let mut repo = fixture("repository");
                repo["name"] = json!(name);
                repo["owner"]["login"] = json!(owner);
                repo["full_name"] = json!(format!("{owner}/{name}"));
                json_reply(200, &repo)
            }
            ("GET", ["repos", _, _, "pulls"]) => {
                let head = query.get("head").cloned().unwrap_or_default();
                let branch = head
                    .split_once(':')
                    .map_or(head.as_str(), |(_, b)| b)
                    .to_owned();
                let pulls: Vec<Value> = state
                    .pulls
                    .iter()
                    .filter(|p| branch.is_empty() || p["head"]["ref"] == branch.as_str())
                    .cloned()
                    .collect();
                json_reply(200, &json!(pulls))
            }
            ("POST", ["repos", owner, name, "pulls"]) => {
                let branch = body["head"].as_str().unwrap_or_default().to_owned();
                if body["base"].is_null() || body["title"].is_null() || branch.is_empty() {
                    return message(422, "Validation Failed");
                }
                if state
                    .pulls
                    .iter()
                    .any(|p| p["head"]["ref"] == branch.as_str() && p["state"] == "open")
                {
                    return message(422, "A pull request already exists");
                }
                let number = 100 + state.pulls.len() as u64;
                let mut pull = fixture("pull_request");
                pull["number"] = json!(number);
                pull["html_url"] =
                    json!(format!("https://github.com/{owner}/{name}/pull/{number}"));
                pull["title"] = body["title"].clone();
                pull["body"] = body["body"].clone();
                pull["draft"] = body["draft"].clone();
                pull["head"]["ref"] = json!(branch);
                pull["head"]["sha"] = json!(Self::head_of(state, &branch));
                pull["base"]["ref"] = body["base"].clone();
                state.pulls.push(pull.clone());
                json_reply(201, &pull)
            }
            ("GET" | "PATCH", ["repos", _, _, "pulls", number]) => {
                let number: u64 = number.parse().unwrap_or(0);
                let Some(index) = state.pulls.iter().position(|p| p["number"] == number) else {
                    return message(404, "Not Found");
                };
                if method == "PATCH" {
                    let branch = state.pulls[index]["head"]["ref"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    let head = Self::head_of(state, &branch);
                    let pull = &mut state.pulls[index];
                    for key in ["title", "body"] {
                        if !body[key].is_null() {
                            pull[key] = body[key].clone();
                        }
                    }
                    pull["head"]["sha"] = json!(head);
                }
                json_reply(200, &state.pulls[index])
            }
            ("POST", ["repos", _, _, "issues", number, "labels"]) => {
                let number: u64 = number.parse().unwrap_or(0);
                let labels: Vec<String> = body["labels"]
                    .as_array()
                    .map(|l| {
                        l.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                state.labels.entry(number).or_default().extend(labels);
                let all: Vec<Value> = state.labels[&number]
                    .iter()
                    .map(|l| json!({ "name": l }))
                    .collect();
                json_reply(200, &json!(all))
            }
            ("POST", ["repos", owner, name, "issues", number, "comments"]) => {
                let number: u64 = number.parse().unwrap_or(0);
                state
                    .comments
                    .push((number, body["body"].as_str().unwrap_or_default().to_owned()));
                let id = state.comments.len();
                json_reply(
                    201,
                    &json!({ "id": id, "html_url": format!("https://github.com/{owner}/{name}/pull/{number}#issuecomment-{id}"), "body": body["body"] }),
                )
            }
            ("GET", ["repos", _, _, "commits", sha, "check-runs"]) => {
                let mut runs = state.check_runs.get(*sha).cloned().unwrap_or_default();
                runs.extend(
                    state
                        .own_checks
                        .iter()
                        .filter(|c| c["head_sha"] == *sha)
                        .cloned(),
                );
                if let Some(name) = query.get("check_name") {
                    runs.retain(|r| r["name"] == name.as_str());
                }
                json_reply(
                    200,
                    &json!({ "total_count": runs.len(), "check_runs": runs }),
                )
            }
            ("GET", ["repos", _, _, "commits", sha, "check-suites"]) => {
                let suites = state.suites.get(*sha).cloned().unwrap_or_default();
                json_reply(
                    200,
                    &json!({ "total_count": suites.len(), "check_suites": suites }),
                )
            }
            ("POST", ["repos", _, _, "check-runs"]) => {
                let mut run = fixture("check_run");
                run["id"] = json!(9_000 + state.own_checks.len() as u64);
                for key in [
                    "name",
                    "head_sha",
                    "status",
                    "external_id",
                    "details_url",
                    "output",
                ] {
                    run[key] = body[key].clone();
                }
                run["conclusion"] = Value::Null;
                run["app"] =
                    json!({ "id": state.app_id, "slug": "auto-swe-test", "name": "auto-swe test" });
                state.own_checks.push(run.clone());
                json_reply(201, &run)
            }
            ("PATCH", ["repos", _, _, "check-runs", id]) => {
                let id: u64 = id.parse().unwrap_or(0);
                let Some(run) = state.own_checks.iter_mut().find(|c| c["id"] == id) else {
                    return message(404, "Not Found");
                };
                for key in ["status", "conclusion", "output"] {
                    if !body[key].is_null() {
                        run[key] = body[key].clone();
                    }
                }
                json_reply(200, run)
            }
            ("GET", ["repos", _, _, "actions", "jobs", job, "logs"]) => ResponseTemplate::new(302)
                .insert_header("location", format!("{}/download/job-{job}.txt", state.base)),
            _ => message(404, "Not Found"),
        }
    }
}

impl Respond for FakeGitHub {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut state = self.state.lock().unwrap();
        let full = request.url.path().to_owned();
        // A GitHub Enterprise base puts the API under /api/v3.
        let path = full.strip_prefix("/api/v3").unwrap_or(&full).to_owned();
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        state.seen.push(Seen {
            method: request.method.to_string(),
            path: path.clone(),
            authorization: request
                .headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            body: body.clone(),
        });
        if let Some(index) = state
            .queued
            .iter()
            .position(|(prefix, _)| path.starts_with(prefix.as_str()))
        {
            let (_, reply) = state.queued.remove(index).unwrap();
            return reply;
        }
        Self::route(&mut state, request, &path, &body)
    }
}
