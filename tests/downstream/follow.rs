//! What the docker and k8s consumers do with their stream, the same for
//! both (each includes this file with `#[path]`, so that each still depends
//! on its one lookout crate alone): print `connected` once the stream says
//! so, then `event KIND ID` for the instance `id`, until it is removed (exit
//! 0) or 120 s pass (exit 1). `who` names the binary in what it says.

use std::process::ExitCode;
use std::time::Duration;

use tokio_stream::{Stream, StreamExt};

use crate::lookout::{EventKind, Item, Status};

pub async fn until_removed(
    who: &str,
    mut items: impl Stream<Item = Item> + Unpin,
    id: &str,
) -> ExitCode {
    let mut connected = false;
    let run = async {
        while let Some(item) = items.next().await {
            match item {
                Item::Status(Status::Connected { .. }) if !connected => {
                    connected = true;
                    println!("connected");
                }
                Item::Event(e) if e.id.as_str() == id => {
                    println!("event {} {}", e.kind, e.id);
                    if e.kind == EventKind::Removed {
                        return true;
                    }
                }
                _ => {}
            }
        }
        false
    };
    match tokio::time::timeout(Duration::from_secs(120), run).await {
        Ok(true) => ExitCode::SUCCESS,
        _ => {
            eprintln!("{who}: {id} was not removed within 120 s");
            ExitCode::FAILURE
        }
    }
}
