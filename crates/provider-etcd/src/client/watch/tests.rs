//! A watch's lines from a gateway that answers with chosen chunks.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use crate::client::EtcdEndpoint;

/// Reads one request (its head, then `content-length` bytes of body).
async fn read_request(socket: &mut tokio::net::TcpStream) {
    let mut seen = Vec::new();
    let mut buf = [0; 4096];
    loop {
        let n = socket.read(&mut buf).await.expect("read the request");
        assert!(n > 0, "the request ended early: {seen:?}");
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen).to_ascii_lowercase();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse::<usize>().expect("a length"));
            if seen.len() >= end + 4 + length {
                return;
            }
        }
    }
}

#[tokio::test]
async fn lines_across_chunks_and_a_last_one_without_its_newline() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("its address");
    let endpoint = EtcdEndpoint::parse(&format!("http://{addr}")).expect("an endpoint");
    let client = Client::new(vec![endpoint], Duration::from_secs(10)).expect("a client");
    let create = WatchCreate {
        key: "a".into(),
        range_end: "b".into(),
        start_revision: "1".into(),
        prev_kv: false,
        progress_notify: false,
    };
    let chunks: [&[u8]; 4] = [
        b"{\"result\":{\"header\":{\"revision\":\"6\"},\"created\":true}}\n{\"result\":",
        b"{\"header\":{\"revision\":\"9\"},\"watch_id\":\"-1\"}}\r\n\n  \nnot json\n",
        b"{\"result\":{\"header\":{\"revision\":",
        b"\"10\"}}}",
    ];
    let server = async {
        let (mut socket, _) = listener.accept().await.expect("accept");
        read_request(&mut socket).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                    transfer-encoding: chunked\r\n\r\n";
        socket.write_all(head.as_bytes()).await.expect("write");
        for chunk in chunks {
            let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
            framed.extend_from_slice(chunk);
            framed.extend_from_slice(b"\r\n");
            socket.write_all(&framed).await.expect("write");
            socket.flush().await.expect("flush");
        }
        socket.write_all(b"0\r\n\r\n").await.expect("write");
        socket
    };
    let watch = async {
        let mut stream = client.watch(&create).await.expect("the watch");
        let mut told = Vec::new();
        while let Some(line) = stream.next().await.expect("a line") {
            told.push(match line {
                Line::Response(r) => format!("{} created {}", r.header.revision, r.created),
                Line::Undecodable(_) => "undecodable".to_owned(),
            });
        }
        told
    };
    let (_socket, told) = tokio::join!(server, watch);
    assert_eq!(
        told,
        [
            "6 created true",
            "9 created false",
            "undecodable",
            "10 created false"
        ]
    );
}
