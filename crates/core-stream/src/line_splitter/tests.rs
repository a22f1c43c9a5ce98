//! The splitter's cases: what each of its callers (moby's `/events`, the
//! Kubernetes and etcd watches) relies on.

use super::*;

/// The lines of `pieces` with a bound of `max`: each line as text, a line
/// over the bound as `TOO LONG`, the last line without `\n` included.
fn split(max: usize, pieces: &[&[u8]]) -> Vec<String> {
    let mut lines = LineSplitter::new(max);
    let mut seen = Vec::new();
    for piece in pieces {
        let mut chunk = *piece;
        while let Some(split) = lines.split(&mut chunk) {
            seen.push(match split {
                SplitLine::Line(line) => String::from_utf8_lossy(&line).into_owned(),
                SplitLine::TooLong(_) => "TOO LONG".to_owned(),
            });
        }
        assert!(chunk.is_empty(), "split until None uses the chunk up");
        assert!(lines.buffered() <= max);
    }
    seen.extend(
        lines
            .finish()
            .map(|l| String::from_utf8_lossy(&l).into_owned()),
    );
    seen
}

#[test]
fn lines_across_chunks() {
    assert_eq!(split(8, &[b"a\nb", b"c\n\nd"]), ["a", "bc", "", "d"]);
    assert_eq!(split(8, &[b"a\n"]), ["a"]);
    assert_eq!(split(8, &[b"", b"ab", b"", b"c\n"]), ["abc"]);
    assert_eq!(split(8, &[b"\n", b"\n"]), ["", ""]);
    assert!(split(8, &[]).is_empty());
    assert!(split(8, &[b""]).is_empty());
}

#[test]
fn a_carriage_return_is_the_callers() {
    // Every caller trims its line (or its JSON parser skips whitespace):
    // the `\r` of a CRLF stays in the line.
    assert_eq!(split(8, &[b"a\r\nb\r", b"\n"]), ["a\r", "b\r"]);
}

#[test]
fn a_whole_line_is_lent_and_a_joined_one_handed_over() {
    let mut lines = LineSplitter::new(64);
    let body = b"one\ntw";
    let mut chunk = &body[..];
    let Some(SplitLine::Line(Cow::Borrowed(one))) = lines.split(&mut chunk) else {
        panic!("a whole line is borrowed");
    };
    // It ends just before the last byte consumed (its `\n`).
    let consumed = body.len() - chunk.len();
    assert_eq!(one, &body[consumed - 1 - one.len()..consumed - 1]);
    assert_eq!(lines.split(&mut chunk), None);
    assert_eq!(lines.buffered(), 2);
    let mut chunk = &b"o\n"[..];
    assert_eq!(
        lines.split(&mut chunk),
        Some(SplitLine::Line(Cow::Owned(b"two".to_vec())))
    );
    assert_eq!(lines.buffered(), 0);
}

#[test]
fn exactly_the_bound_passes_one_more_byte_fails_and_the_next_line_is_read() {
    // In one chunk, and one byte a chunk.
    let body = b"12345678\n123456789\nnext\n";
    assert_eq!(split(8, &[body]), ["12345678", "TOO LONG", "next"]);
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(split(8, &bytes), ["12345678", "TOO LONG", "next"]);
    // A line over the bound, cut anywhere: reported once, the rest skipped
    // to its newline, whatever the chunks.
    let long = [b"x".repeat(30), b"\nafter\n".to_vec()].concat();
    for cut in [1, 3, 8, 9, 10, 29, 31] {
        let pieces: Vec<&[u8]> = long.chunks(cut).collect();
        assert_eq!(split(8, &pieces), ["TOO LONG", "after"], "chunks of {cut}");
    }
    // The bound's line last, without its newline.
    assert_eq!(split(8, &[b"a\n", b"1234", b"5678"]), ["a", "12345678"]);
    // Cut off by the end of the body while skipping: nothing more.
    assert_eq!(split(8, &[b"123456789", b"0"]), ["TOO LONG"]);
    // Whole in one chunk, or completed by one, over the bound by a byte.
    assert_eq!(split(8, &[b"123456789\nok\n"]), ["TOO LONG", "ok"]);
    assert_eq!(split(8, &[b"1234", b"56789\nok\n"]), ["TOO LONG", "ok"]);
}

#[test]
fn an_overlong_line_is_reported_once_with_its_start() {
    let max = 1 << 20;
    let half = vec![b'x'; max / 2 + 1];
    let mut lines = LineSplitter::new(max);
    let mut told = Vec::new();
    for piece in [&half[..], &half, &half, b"yy\nnext\n"] {
        let mut chunk = piece;
        while let Some(split) = lines.split(&mut chunk) {
            told.push(split.clone());
        }
    }
    assert_eq!(
        told,
        [
            SplitLine::TooLong(Cow::Owned(half.clone())),
            SplitLine::Line(Cow::Borrowed(&b"next"[..])),
        ]
    );
    // Cut off by the end of the body: nothing more.
    assert_eq!(split(max, &[&half, &half]), ["TOO LONG"]);
}

#[test]
fn the_buffer_never_holds_more_than_the_bound() {
    let mut lines = LineSplitter::new(1000);
    for _ in 0..333 {
        assert_eq!(lines.split(&mut &b"abc"[..]), None);
        assert!(
            lines.partial.capacity() <= 1000,
            "{}",
            lines.partial.capacity()
        );
    }
    assert_eq!(lines.split(&mut &b"x"[..]), None, "exactly the bound");
    assert_eq!(lines.partial.capacity(), 1000);
    assert!(matches!(
        lines.split(&mut &b"y"[..]),
        Some(SplitLine::TooLong(_))
    ));
    assert_eq!(lines.partial.capacity(), 0, "what had come is dropped");
    // 20 000 bytes without a newline, bound 1000: reported once.
    assert_eq!(split(1000, &vec![&b"xy"[..]; 10_000]), ["TOO LONG"]);
}

#[test]
fn an_unterminated_line_is_told_before_the_buffer_grows_further() {
    let mut lines = LineSplitter::new(1024);
    let mut fed = 0;
    loop {
        let mut chunk = &[b'x'; 100][..];
        fed += 100;
        match lines.split(&mut chunk) {
            None => assert!(fed <= 1024, "fed {fed} bytes past a bound of 1024"),
            Some(SplitLine::TooLong(start)) => {
                assert_eq!((fed, start.len()), (1100, 1000));
                break;
            }
            Some(line) => panic!("{line:?}"),
        }
    }
    // Exactly the bound, terminated: a line.
    let mut lines = LineSplitter::new(1024);
    assert_eq!(lines.split(&mut &[b'y'; 1024][..]), None);
    let line = lines.split(&mut &b"\n"[..]);
    assert!(matches!(line, Some(SplitLine::Line(l)) if l.len() == 1024));
}

#[test]
fn finish_leaves_it_as_new() {
    let mut lines = LineSplitter::new(4);
    assert_eq!(lines.split(&mut &b"abcdef"[..]).map(|_| ()), Some(()));
    assert_eq!(lines.finish(), None, "over the bound: nothing");
    assert_eq!(split(4, &[b"ab"]), ["ab"]);
    assert_eq!(lines.split(&mut &b"ab"[..]), None);
    assert_eq!(lines.finish().as_deref(), Some(&b"ab"[..]));
    assert_eq!(lines.finish(), None);
    assert_eq!(
        lines.split(&mut &b"cd\n"[..]),
        Some(SplitLine::Line(Cow::Borrowed(&b"cd"[..])))
    );
}
