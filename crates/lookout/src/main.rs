//! `lookout`: one `docker events` / `kubectl get -w` for Docker, Podman, Swarm
//! and Kubernetes that survives engine restarts; and what publishers wrote to
//! etcd, read back the same way.
//!
//! Events go to stdout (one line each, flushed), connection status to stderr.
//! See `lookout --help`.
//!
//! This file only starts: the flags ([`cli`]), the log, `--serve`'s socket
//! and the runtime, then the run ([`engine`]: the sources of each engine
//! family; [`mode`]: print, publish or serve, each with or without
//! [`render`] (`--render`, `--notify`, `--wait`) and [`exec`] (`--exec`,
//! over [`queue`]); [`consume`]: the one loop).
//! The other subcommands need no engine: [`manual`] (completions, man page)
//! and [`probe`] (a health check).
//! Whatever ends a run early is an [`Exit`], its exit code and message.

mod cli;
mod consume;
mod duration;
mod engine;
mod exec;
mod exit;
mod log;
mod manual;
mod mode;
mod output;
mod probe;
mod publish;
mod queue;
mod render;
mod serve;
mod sources;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::cli::{Cli, Command, Engine};
use crate::exit::Exit;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = match &cli.command {
        Command::Engine(engine) => engine.common().json,
        _ => false,
    };
    log::init(json);
    let result = match cli.command {
        Command::Engine(engine) => start(engine),
        Command::Completions { shell } => manual::completions(shell),
        Command::Man { dir } => manual::man(dir.as_deref()),
        Command::Probe(args) => probe::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(exit) => exit.report(),
    }
}

/// Sets up `--serve` and the runtime, and runs.
fn start(engine: Engine) -> Result<(), Exit> {
    // Bound, token and TLS files read, metrics recorder installed before the watch
    // (the hub registers its metrics when it is made).
    let common = engine.common();
    let serve = common
        .serve
        .map(|addr| {
            serve::Prepared::new(
                addr,
                common.token_file.as_deref(),
                common.tls_files(),
                common.max_connections as usize,
            )
        })
        .transpose()
        .map_err(|e| Exit::usage("cannot serve", &e))?;
    // Serving: one worker per core for the clients; else one thread is plenty.
    let runtime = if serve.is_some() {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    }
    .map_err(|e| Exit::Failure(format!("cannot start the async runtime: {e}")))?;
    let result = runtime.block_on(engine::run(engine, serve));
    // Whatever did not end by itself (a connection past its grace) ends here.
    runtime.shutdown_timeout(Duration::from_millis(200));
    result
}
