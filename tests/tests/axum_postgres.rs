//! Issue 37: the axum_postgres example (a to-do API on a real PostgreSQL,
//! a pool per shard, one route calling another local HTTP service) served
//! in-process as its `main` serves it, on kernel sockets and over AF_XDP
//! (root, on a testbed it builds and removes; the database and the other
//! service on the server namespace's loopback, reached through the kernel
//! while the clients come through the NIC). Each test starts a PostgreSQL
//! of its own and stops it afterwards, also on failure.
#![cfg(target_os = "linux")]

use std::sync::Mutex;

use fairway::Server;
use fairway::config::Config;
use fairway_tests::platform::{Target, gauge};
use fairway_tests::postgres::Postgres;
use fairway_tests::todos::{check_database_outage, check_todo_api};

#[path = "../../server/examples/axum_postgres.rs"]
#[allow(dead_code)]
mod axum_postgres;

use axum_postgres::{SUGGESTIONS, TodoState};

/// One PostgreSQL and one load at a time on two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn the_todo_api_on_postgres_answers_as_the_database_says_on_kernel_sockets() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let db = Postgres::start(None).unwrap_or_else(|e| panic!("{e}"));
    let database: tokio_postgres::Config = db.url().parse().unwrap();
    axum_postgres::prepare_database(&database).unwrap();
    let suggestions = axum_postgres::suggestion_service().unwrap();
    let args = ["fairway", "--listen", "127.0.0.1:0", "--shards", "2", "--log", "warn"];
    let server = Server::builder()
        .config(Config::load(args, None).unwrap())
        .axum(move || axum_postgres::app(TodoState::new(&database, suggestions)))
        .spawn()
        .unwrap();
    let target = Target::local(server.local_addr());
    check_todo_api(&target, &db, &SUGGESTIONS);
    check_database_outage(&target, &db);
    assert_eq!(gauge(&server, "fairway_task_panics_total"), 0);
    assert_eq!(server.shutdown().unwrap().len(), 2);
}

#[cfg(feature = "afxdp")]
#[test]
fn the_todo_api_on_postgres_answers_as_the_database_says_over_afxdp() {
    use fairway_tests::served::Served;
    use fairway_tests::testbed::{self, SERVER_IF, Testbed, TestbedConfig};

    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    testbed::require_root().unwrap_or_else(|e| panic!("{e}"));
    let prefix = format!("pg{}", std::process::id() % 100_000);
    let tb = Testbed::up(TestbedConfig::new(prefix).clients(1).queues(2)).unwrap_or_else(|e| panic!("{e}"));
    let ns = tb.server_ns();
    let db = Postgres::start(Some(&ns)).unwrap_or_else(|e| panic!("{e}"));
    let database: tokio_postgres::Config = db.url().parse().unwrap();
    testbed::in_netns(&ns, || axum_postgres::prepare_database(&database)).unwrap().unwrap();
    let suggestions = testbed::in_netns(&ns, axum_postgres::suggestion_service).unwrap().unwrap();
    let ip = tb.server_prefix();
    let flags = ["--backend", "afxdp", "--iface", SERVER_IF, "--ip", &ip, "--queues", "2"];
    let served =
        Served::start_with(&tb, &flags, |b| b.axum(move || axum_postgres::app(TodoState::new(&database, suggestions))));
    let target = Target::testbed(&tb, 0);
    check_todo_api(&target, &db, &SUGGESTIONS);
    check_database_outage(&target, &db);
    assert_eq!(gauge(served.handle(), "fairway_task_panics_total"), 0);
    assert_eq!(served.stop().len(), 2);
}
