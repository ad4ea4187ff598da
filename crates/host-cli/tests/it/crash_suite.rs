//! The crash suite: the demo, or the worker driving it, killed with SIGKILL at random points
//! (once or twice per trial), then a fresh worker and `pr merge` take the run to its end. Each
//! trial must end exactly as an uninterrupted run does: every node finished as often, one pull
//! request, merged; the run's usage equal to the uninterrupted run's plus exactly what the
//! killed attempts spent (each killed attempt's calls a prefix of the uninterrupted calls of its
//! step, each billed once); and nothing of a killed process left — no workspace, launcher or
//! data directory under the home or `TMPDIR`, no cgroup. Every process here is one the test
//! started, ended by its PID.
//!
//! `AUTO_SWE_CRASH_TRIALS` sets the number of trials (20 by default; more for a longer soak),
//! `AUTO_SWE_CRASH_SEED` the seed of the kill points (printed by every run).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::crash::{
    Env, bin, cli, finished, output, parked_for_merge, repository, sandbox_available, show,
    start_demo, stop, wait_for, worker, worker_logs,
};

/// Trials run this many at a time.
const PARALLEL: usize = 4;
/// Kills land in the first this-many milliseconds of a process: the demo's whole drive to the
/// merge wait takes about two seconds on a debug build.
const KILL_WINDOW_MS: u64 = 3_000;

/// The seed of this run's kill points, printed so a failing trial can be told apart.
static SEED: AtomicU64 = AtomicU64::new(0);

/// A pseudo-random number below `bound` (xorshift over the run's seed).
fn random_below(bound: u64) -> u64 {
    let mut x = SEED.load(Ordering::Relaxed);
    loop {
        let mut next = x;
        next ^= next << 13;
        next ^= next >> 7;
        next ^= next << 17;
        match SEED.compare_exchange(x, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next % bound.max(1),
            Err(seen) => x = seen,
        }
    }
}

/// A trial's home: its own `TMPDIR` (reachable by the sandbox account, as `/tmp` is) and a
/// lease as long as the crash tests' workers take, so the demo's lapses as theirs do.
fn trial_env() -> Env {
    let mut env = Env::sqlite();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    env.tmp = Some(tmp);
    std::fs::write(
        env.path().join("config.toml"),
        "[worker]\nleaseSeconds = 6\n",
    )
    .unwrap();
    env
}

/// The demo, attached: it drives its run itself.
fn attached_demo(env: &Env) -> Child {
    let mut command = bin();
    command
        .args(["demo", "--sandbox", "local", "--format", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    env.apply(&mut command);
    command.spawn().unwrap()
}

/// Kills `child` (SIGKILL) after `after`, unless it ended first; its PID.
fn kill_after(child: Child, after: Duration) -> u32 {
    let pid = child.id();
    std::thread::sleep(after);
    stop(child);
    pid
}

/// Stops `child` as a person would (SIGTERM), and waits for it to end (SIGKILL after 30 s).
fn terminate(mut child: Child) {
    #[expect(
        clippy::disallowed_methods,
        reason = "kill(1) signals a process the test started"
    )]
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        let late = Instant::now() > deadline;
        if late {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert!(!late, "a worker did not stop within 30 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The home's runs, newest first.
fn runs(env: &Env) -> Vec<String> {
    cli(env, &["runs", "list", "--format", "json"])["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Whether the run stopped moving: parked or ended.
fn settled(shown: &Value) -> bool {
    ["WAITING", "SUCCESS", "FAILED", "CANCELLED"].contains(&shown["status"].as_str().unwrap_or(""))
}

/// A step that billed a model call and has not finished, if one is seen.
fn mid_step(shown: &Value) -> Option<String> {
    shown["modelCalls"]
        .as_array()?
        .iter()
        .filter_map(|c| c["recordingId"].as_str())
        .find(|recording| {
            !shown["steps"].as_array().is_some_and(|steps| {
                steps
                    .iter()
                    .any(|s| s["recordingId"] == *recording && s["status"] == "SUCCESS")
            })
        })
        .map(str::to_owned)
}

/// What one trial did and how its run ended.
struct Ended {
    env: Env,
    shown: Value,
    killed: Vec<u32>,
    kills: String,
}

/// One trial: `kills` SIGKILLs at random points (none: the uninterrupted run), alternately of
/// the attached demo and of a worker; then a worker drives the run to the merge wait, and
/// `pr merge` to its end.
fn trial(number: usize, kills: usize) -> Ended {
    let env = trial_env();
    let mut killed = Vec::new();
    let mut said = Vec::new();
    let mut run = None;
    for kill in 0..kills {
        let at = Duration::from_millis(random_below(KILL_WINDOW_MS));
        if run.is_none() && (number + kill).is_multiple_of(2) {
            killed.push(kill_after(attached_demo(&env), at));
            said.push(format!("demo at {at:?}"));
            // Killed before it recorded the run, the demo left nothing: it is started again.
            run = runs(&env).into_iter().next();
        } else {
            let id = run.get_or_insert_with(|| start_demo(&env)).clone();
            let driver = worker(&env, &[]);
            // Every fourth trial's first kill lands as soon as a step is seen to have billed a
            // call and not finished; every other kill of the rest within a second of validation
            // being seen done, while the implementer is at work.
            if number % 4 == 1 && kill == 0 {
                let seen = wait_for(&env, &id, "a billed call", |s| {
                    mid_step(s).is_some() || settled(s)
                });
                killed.push(kill_after(driver, Duration::ZERO));
                said.push(format!("worker mid-step ({:?})", mid_step(&seen)));
            } else if random_below(2) == 0 {
                let at = Duration::from_millis(random_below(1_000));
                let seen = wait_for(&env, &id, "validate", |s| {
                    finished(s, "validate") == 1 || settled(s)
                });
                killed.push(kill_after(driver, at));
                said.push(format!(
                    "worker at {at:?} past validation{}",
                    if finished(&seen, "implement") == 1 {
                        " (implemented)"
                    } else {
                        ""
                    }
                ));
            } else {
                killed.push(kill_after(driver, at));
                said.push(format!("worker at {at:?}"));
            }
        }
    }
    let run = run.unwrap_or_else(|| start_demo(&env));
    let driver = worker(&env, &[]);
    wait_for(&env, &run, "the merge wait", parked_for_merge);
    terminate(driver);
    let merged = output(&env, &["pr", "merge", &run, "--format", "json"]);
    assert!(
        merged.status.success(),
        "trial {number} ({said:?}): {}\n{}",
        String::from_utf8_lossy(&merged.stdout),
        worker_logs(&env)
    );
    let shown = show(&env, &run);
    Ended {
        env,
        shown,
        killed,
        kills: said.join(", "),
    }
}

/// How often each node finished.
fn finishes(shown: &Value) -> BTreeMap<String, usize> {
    let mut nodes = BTreeMap::new();
    for step in shown["steps"].as_array().unwrap() {
        let node = step["node"].as_str().unwrap();
        nodes.insert(node.to_owned(), finished(shown, node));
    }
    nodes
}

fn cost(usage: &Value) -> [i64; 3] {
    [
        usage["costMicros"].as_i64().unwrap(),
        usage["inputTokens"].as_i64().unwrap(),
        usage["outputTokens"].as_i64().unwrap(),
    ]
}

fn add(a: [i64; 3], b: [i64; 3]) -> [i64; 3] {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

/// An attempt of a step: its recording id, attempt, lease epoch and execution.
type AttemptKey = (String, i64, i64, String);

/// The run's model calls, per attempt (recording, attempt, epoch, execution), in call order.
fn attempts(shown: &Value) -> BTreeMap<AttemptKey, Vec<(i64, [i64; 3])>> {
    let mut attempts: BTreeMap<_, Vec<_>> = BTreeMap::new();
    for call in shown["modelCalls"].as_array().unwrap() {
        let key = (
            call["recordingId"].as_str().unwrap().to_owned(),
            call["attempt"].as_i64().unwrap(),
            call["epoch"].as_i64().unwrap(),
            call["execution"].as_str().unwrap().to_owned(),
        );
        attempts
            .entry(key)
            .or_default()
            .push((call["index"].as_i64().unwrap(), cost(&call["usage"])));
    }
    for calls in attempts.values_mut() {
        calls.sort_by_key(|(index, _)| *index);
    }
    attempts
}

/// Checks the spend of a trial against the uninterrupted run's: every attempt's calls are a
/// prefix of its step's uninterrupted calls (none twice, none skipped), every step has at least
/// one whole attempt, and the run's usage is the sum of its calls; returns what the attempts
/// beyond one whole one per step spent.
fn extra_spend(number: usize, baseline: &Value, ended: &Ended) -> [i64; 3] {
    let mut steps: BTreeMap<String, Vec<[i64; 3]>> = BTreeMap::new();
    for ((recording, ..), calls) in attempts(baseline) {
        assert!(
            steps
                .insert(recording, calls.into_iter().map(|(_, c)| c).collect())
                .is_none(),
            "the uninterrupted run ran a step twice"
        );
    }
    let context = || format!("trial {number} ({}): {}", ended.kills, ended.shown);
    let mut whole: BTreeMap<&str, usize> = BTreeMap::new();
    let mut total = [0; 3];
    let mut extra = [0; 3];
    let trial_attempts = attempts(&ended.shown);
    for ((recording, ..), calls) in &trial_attempts {
        let expected = steps.get(recording);
        assert!(
            expected.is_some(),
            "{recording} spent, unlike the uninterrupted run: {}",
            context()
        );
        let expected = expected.unwrap();
        for (position, (index, usage)) in calls.iter().enumerate() {
            assert_eq!(
                *index,
                i64::try_from(position).unwrap(),
                "{recording}: a call skipped or twice: {}",
                context()
            );
            assert_eq!(
                Some(usage),
                expected.get(position),
                "{recording}: a call unlike the uninterrupted one: {}",
                context()
            );
            total = add(total, *usage);
        }
        let is_whole = calls.len() == expected.len();
        let seen = whole.entry(recording.as_str()).or_default();
        if is_whole && *seen == 0 {
            *seen += 1;
        } else {
            for (_, usage) in calls {
                extra = add(extra, *usage);
            }
        }
    }
    for recording in steps.keys() {
        assert_eq!(
            whole.get(recording.as_str()),
            Some(&1),
            "{recording} has no whole attempt: {}",
            context()
        );
    }
    assert_eq!(
        cost(&ended.shown["usage"]),
        total,
        "the run's usage is not the sum of its calls: {}",
        context()
    );
    extra
}

/// Entries of `dir` and of its launcher, data and ephemeral directories.
fn entries(dir: &Path) -> Vec<String> {
    let mut left = Vec::new();
    for sub in ["", ".data", ".launch", ".ephemeral"] {
        for entry in std::fs::read_dir(dir.join(sub))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            // The backend's own files (its seccomp filter, the directories listed here) are
            // shared by every process, not left by one.
            if sub.is_empty() && name.starts_with('.') {
                continue;
            }
            left.push(format!("{}", dir.join(sub).join(name).display()));
        }
    }
    left
}

/// What is left of a trial's processes once its run ended: workspaces and their records under
/// the home and its `TMPDIR`, cgroups of the killed processes.
fn leftovers(ended: &Ended) -> Vec<String> {
    let mut left = entries(&ended.env.path().join("workspaces"));
    if let Some(tmp) = &ended.env.tmp {
        left.extend(entries(tmp.path()));
    }
    for parent in auto_swe_sandbox::testing::cgroup_parents() {
        for entry in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if ended
                .killed
                .iter()
                .any(|pid| name.starts_with(&format!("{pid}.")))
            {
                left.push(format!("cgroup {}", entry.path().display()));
            }
        }
    }
    left
}

/// The pull requests written into the trial's repository.
fn pull_requests(env: &Env) -> usize {
    std::fs::read_dir(repository(env.path()).join("auto-swe-pulls"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .count()
}

#[test]
fn the_demo_and_its_worker_killed_at_random_points_end_as_an_uninterrupted_run() {
    if !sandbox_available() {
        return;
    }
    let seed = std::env::var("AUTO_SWE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::UNIX_EPOCH.elapsed().unwrap().as_nanos() as u64 | 1);
    SEED.store(seed, Ordering::Relaxed);
    let trials: usize = std::env::var("AUTO_SWE_CRASH_TRIALS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(20);
    eprintln!("crash suite: {trials} trials, seed {seed}");
    let started = Instant::now();
    let baseline = trial(0, 0);
    assert_eq!(baseline.shown["status"], "SUCCESS", "{}", baseline.shown);
    assert!(cost(&baseline.shown["usage"])[0] > 0);
    assert!(
        leftovers(&baseline).is_empty(),
        "{:?}",
        leftovers(&baseline)
    );
    let expected = finishes(&baseline.shown);

    let mut extra_total = [0; 3];
    let mut with_extra = 0;
    for round in (1..=trials).collect::<Vec<_>>().chunks(PARALLEL) {
        let ended: Vec<(usize, Ended)> = std::thread::scope(|scope| {
            let handles: Vec<_> = round
                .iter()
                .map(|&number| {
                    scope.spawn(move || (number, trial(number, 1 + usize::from(number % 3 == 0))))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (number, ended) in ended {
            let context = format!("trial {number} ({})", ended.kills);
            assert_eq!(
                ended.shown["status"], "SUCCESS",
                "{context}: {}",
                ended.shown
            );
            assert_eq!(
                finishes(&ended.shown),
                expected,
                "{context}: {}",
                ended.shown
            );
            let prs = ended.shown["pullRequests"].as_array().unwrap();
            assert_eq!(prs.len(), 1, "{context}: {}", ended.shown);
            assert_eq!(
                prs[0]["state"], baseline.shown["pullRequests"][0]["state"],
                "{context}"
            );
            assert_eq!(pull_requests(&ended.env), 1, "{context}");
            let extra = extra_spend(number, &baseline.shown, &ended);
            assert_eq!(
                cost(&ended.shown["usage"]),
                add(cost(&baseline.shown["usage"]), extra),
                "{context}"
            );
            if extra != [0; 3] {
                with_extra += 1;
            }
            extra_total = add(extra_total, extra);
            let left = leftovers(&ended);
            assert!(left.is_empty(), "{context}: left {left:?}");
            eprintln!("trial {number}: {}; extra spend {extra:?}", ended.kills);
        }
    }
    // The aimed kills (one trial in four) bill killed attempts: unless every one of them lost
    // its race with the step's end, some spend was billed beyond the uninterrupted run's.
    if trials >= 8 {
        assert!(with_extra > 0, "no killed attempt billed anything");
    }
    eprintln!(
        "crash suite: {trials} trials in {:?}; {with_extra} billed killed attempts, {extra_total:?} in all; nothing left",
        started.elapsed()
    );
}
