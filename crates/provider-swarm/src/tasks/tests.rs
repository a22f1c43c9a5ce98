use serde_json::{Value, json};

use super::*;

/// `2026-12-07T12:00:SS.FFFZ`: a time `at` seconds (and `frac`, Go's
/// trimmed fraction) into a minute.
fn time(at: u32, frac: &str) -> String {
    if frac.is_empty() {
        format!("2026-12-07T12:00:{at:02}Z")
    } else {
        format!("2026-12-07T12:00:{at:02}.{frac}Z")
    }
}

/// A task of `service` in `slot`, created at `created` s, in `state`
/// (reached at `at` s) with `desired`, `err`, running `args`.
#[allow(clippy::too_many_arguments)]
fn task(
    id: &str,
    service: &str,
    slot: u64,
    created: u32,
    at: u32,
    (state, desired): (&str, &str),
    err: Option<&str>,
    args: &str,
) -> Value {
    let mut status = json!({ "Timestamp": time(at, ""), "State": state, "Message": "started" });
    if let Some(err) = err {
        status["Err"] = json!(err);
        status["ContainerStatus"] = json!({ "ContainerID": "c", "PID": 0, "ExitCode": 7 });
    }
    json!({
        "ID": id,
        "Version": { "Index": 100 + created },
        "CreatedAt": time(created, ""),
        "UpdatedAt": time(at, ""),
        "Spec": { "ContainerSpec": { "Image": "busybox", "Args": ["sh", "-c", args] }, "ForceUpdate": 0 },
        "ServiceID": service,
        "Slot": slot,
        "NodeID": "node1",
        "Status": status,
        "DesiredState": desired,
    })
}

const EXIT7: Option<&str> = Some("task: non-zero exit (7)");

fn decode(tasks: &[Value]) -> Vec<(String, Reason)> {
    failures(Value::Array(tasks.to_vec()).to_string().as_bytes()).expect("a task list")
}

#[test]
fn a_failed_task_makes_its_service_fail_while_it_restarts() {
    let tasks = [
        task(
            "t1",
            "svc",
            1,
            10,
            11,
            ("failed", "shutdown"),
            EXIT7,
            "exit 7",
        ),
        // The restart, waiting for its delay.
        task("t2", "svc", 1, 11, 11, ("ready", "ready"), None, "exit 7"),
    ];
    let expected = Reason::failing("task: non-zero exit (7)").exit_code(Some(7));
    assert_eq!(decode(&tasks), [("svc".to_owned(), expected.clone())]);
    // The restart runs: the service no longer fails.
    let mut running = tasks.clone();
    running[1] = task(
        "t2",
        "svc",
        1,
        11,
        12,
        ("running", "running"),
        None,
        "exit 7",
    );
    assert_eq!(decode(&running), []);
    // It starts (its check has not passed yet): still failing.
    running[1] = task(
        "t2",
        "svc",
        1,
        11,
        12,
        ("starting", "running"),
        None,
        "exit 7",
    );
    assert_eq!(decode(&running), [("svc".to_owned(), expected)]);
}

/// `--restart-max-attempts` spent: every task is desired `shutdown`, the
/// newest failed: Swarm gave up, and its newest error is told.
#[test]
fn a_service_whose_restarts_are_spent_has_failed() {
    let tasks = [
        task(
            "t2",
            "svc",
            1,
            12,
            13,
            ("failed", "shutdown"),
            Some("task: non-zero exit (8)"),
            "x",
        ),
        task("t1", "svc", 1, 10, 11, ("failed", "shutdown"), EXIT7, "x"),
    ];
    assert_eq!(
        decode(&tasks),
        [(
            "svc".to_owned(),
            Reason::failing("task: non-zero exit (8)")
                .exit_code(Some(7))
                .failed(true)
        )]
    );
}

/// A rejected task (its image is missing) says why, without an exit code.
#[test]
fn a_rejected_task_says_why() {
    let mut rejected = task("t1", "svc", 1, 10, 11, ("rejected", "shutdown"), None, "x");
    rejected["Status"]["Err"] = json!("No such image: nope:latest");
    let tasks = [
        rejected,
        task("t2", "svc", 1, 11, 11, ("pending", "running"), None, "x"),
    ];
    assert_eq!(
        decode(&tasks),
        [(
            "svc".to_owned(),
            Reason::failing("No such image: nope:latest")
        )]
    );
}

#[test]
fn completed_running_and_superseded_tasks_do_not_fail() {
    let tasks = [
        // A job's task that completed.
        task(
            "j1",
            "job",
            1,
            10,
            11,
            ("complete", "complete"),
            None,
            "true",
        ),
        // A failure, then a task of the same spec that runs.
        task("r1", "run", 1, 10, 11, ("failed", "shutdown"), EXIT7, "x"),
        task("r2", "run", 1, 12, 13, ("running", "running"), None, "x"),
        // A failure of the old spec; the new spec's task is starting.
        task("o1", "old", 1, 10, 11, ("failed", "shutdown"), EXIT7, "old"),
        task("o2", "old", 1, 12, 12, ("starting", "running"), None, "new"),
        // Shut down by a scale: no error.
        task(
            "s1",
            "scaled",
            2,
            10,
            11,
            ("shutdown", "shutdown"),
            None,
            "x",
        ),
        // Failed without an error: nothing to tell.
        task("e1", "silent", 1, 10, 11, ("failed", "shutdown"), None, "x"),
    ];
    assert_eq!(decode(&tasks), []);
}

/// Several failing slots: the most recent failure is told (by when it
/// failed, not when its task was made).
#[test]
fn the_most_recent_failure_of_several_slots_is_told() {
    let tasks = [
        task(
            "a1",
            "svc",
            1,
            25,
            40,
            ("failed", "shutdown"),
            Some("slot 1"),
            "x",
        ),
        task("a2", "svc", 1, 41, 41, ("pending", "running"), None, "x"),
        task(
            "b1",
            "svc",
            2,
            30,
            35,
            ("failed", "running"),
            Some("slot 2"),
            "x",
        ),
        task("c1", "svc", 3, 5, 6, ("running", "running"), None, "x"),
    ];
    let told = decode(&tasks);
    assert_eq!(told.len(), 1);
    assert_eq!(told[0].1.message.as_deref(), Some("slot 1"));
    assert!(!told[0].1.failed, "tasks are meant to run");
}

/// A global service's tasks have no slot: each node is one.
#[test]
fn a_global_service_fails_by_node() {
    let mut failed = task("g1", "glob", 0, 10, 11, ("failed", "shutdown"), EXIT7, "x");
    failed["NodeID"] = json!("n1");
    let mut other = task("g2", "glob", 0, 12, 13, ("running", "running"), None, "x");
    other["NodeID"] = json!("n2");
    let mut restart = task("g3", "glob", 0, 12, 12, ("ready", "ready"), None, "x");
    restart["NodeID"] = json!("n1");
    assert_eq!(decode(&[failed.clone(), other.clone()]).len(), 1);
    assert_eq!(decode(&[failed, other, restart]).len(), 1);
}

/// Go trims a time's fraction: `:10.1Z` is after `:10Z`, though it sorts
/// before it as text.
#[test]
fn times_compare_as_times() {
    let mut newest = task(
        "t2",
        "svc",
        1,
        10,
        11,
        ("failed", "shutdown"),
        Some("newest"),
        "x",
    );
    newest["CreatedAt"] = json!(time(10, "1"));
    let mut older = task("t1", "svc", 1, 10, 11, ("running", "running"), None, "x");
    older["CreatedAt"] = json!(time(10, ""));
    let told = decode(&[older, newest]);
    assert_eq!(told[0].1.message.as_deref(), Some("newest"));
}

#[test]
fn malformed_entries_are_skipped() {
    let good = task("t1", "svc", 1, 10, 11, ("failed", "shutdown"), EXIT7, "x");
    let mut no_service = good.clone();
    no_service
        .as_object_mut()
        .expect("an object")
        .remove("ServiceID");
    let mut bad_time = task(
        "t2",
        "svc",
        1,
        12,
        12,
        ("failed", "shutdown"),
        Some("bad"),
        "x",
    );
    bad_time["CreatedAt"] = json!("yesterday");
    let mut no_state = task(
        "t3",
        "svc",
        1,
        13,
        13,
        ("failed", "shutdown"),
        Some("bad"),
        "x",
    );
    no_state["Status"] = json!({ "Err": "bad" });
    let tasks = [no_service, bad_time, json!(42), json!({}), no_state, good];
    let told = decode(&tasks);
    assert_eq!(told.len(), 1);
    assert_eq!(
        told[0].1.message.as_deref(),
        Some("task: non-zero exit (7)")
    );
    assert!(failures(b"{}").is_err());
    assert!(failures(b"[").is_err());
}

#[test]
fn the_path_lists_the_tasks_of_the_services() {
    let path = path(&["a1", "b2"]);
    let (base, filters) = path.split_once("?filters=").expect("a filter");
    assert_eq!(base, "/tasks");
    assert!(
        filters
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'%')
    );
    assert_eq!(filters, "%7B%22service%22%3A%5B%22a1%22%2C%22b2%22%5D%7D");
}
