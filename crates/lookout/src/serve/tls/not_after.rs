//! A certificate's notAfter (its expiry), read from its DER: the few fields
//! before it are skipped, no more of X.509 is parsed (rustls checks the
//! rest). For `lookout_serve_tls_cert_not_after_timestamp_seconds`.

/// One DER element at the start of `input`: its tag, its content, what
/// follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let (bytes, after) = rest.split_at_checked(n)?;
        rest = after;
        bytes
            .iter()
            .fold(0usize, |len, &b| (len << 8) | usize::from(b))
    };
    let (content, rest) = rest.split_at_checked(len)?;
    Some((tag, content, rest))
}

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
/// `[0] EXPLICIT Version`.
const VERSION: u8 = 0xa0;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// The notAfter of the DER certificate `der`, in seconds since the Unix
/// epoch; `None` when it cannot be read.
pub fn not_after(der: &[u8]) -> Option<i64> {
    let (SEQUENCE, certificate, _) = element(der)? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = element(certificate)? else {
        return None;
    };
    let (mut tag, _, mut rest) = element(tbs)?;
    if tag == VERSION {
        (tag, _, rest) = element(rest)?;
    }
    if tag != INTEGER {
        return None; // the serial number
    }
    let (SEQUENCE, _signature, rest) = element(rest)? else {
        return None;
    };
    let (SEQUENCE, _issuer, rest) = element(rest)? else {
        return None;
    };
    let (SEQUENCE, validity, _) = element(rest)? else {
        return None;
    };
    let (_, _not_before, validity) = element(validity)?;
    let (tag, time, _) = element(validity)?;
    match tag {
        UTC_TIME => {
            // YYMMDDHHMMSSZ, YY < 50 being 20YY (RFC 5280, 4.1.2.5.1).
            let yy = digits(time.get(..2)?)?;
            let year = if yy < 50 { 2000 + yy } else { 1900 + yy };
            seconds(year, time.get(2..)?)
        }
        GENERALIZED_TIME => seconds(digits(time.get(..4)?)?, time.get(4..)?),
        _ => None,
    }
}

/// The decimal number `s` (ASCII digits only).
fn digits(s: &[u8]) -> Option<i64> {
    s.iter().try_fold(0i64, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
    })
}

/// `MMDDHHMMSSZ` of `year`, in seconds since the epoch (UTC, as RFC 5280
/// requires).
fn seconds(year: i64, rest: &[u8]) -> Option<i64> {
    if rest.len() != 11 || rest[10] != b'Z' {
        return None;
    }
    let field = |i: usize| digits(&rest[i..i + 2]);
    let (month, day) = (field(0)?, field(2)?);
    let (hour, minute, second) = (field(4)?, field(6)?, field(8)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate valid until midnight (UTC) of a day.
    fn certificate(year: i32, month: u8, day: u8) -> Vec<u8> {
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        params.not_after = rcgen::date_time_ymd(year, month, day);
        let key = rcgen::KeyPair::generate().expect("key");
        params
            .self_signed(&key)
            .expect("certificate")
            .der()
            .to_vec()
    }

    #[test]
    fn reads_utc_and_generalized_times() {
        // 2049-12-31: UTCTime; 2050 on: GeneralizedTime (RFC 5280).
        let utc = certificate(2049, 12, 31);
        assert_eq!(not_after(&utc), Some(2_524_521_600));
        let generalized = certificate(2050, 1, 1);
        assert_eq!(not_after(&generalized), Some(2_524_608_000));
        let past = certificate(1999, 3, 1);
        assert_eq!(not_after(&past), Some(920_246_400));
    }

    #[test]
    fn the_calendar() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
    }

    #[test]
    fn garbage_is_none() {
        assert_eq!(not_after(b""), None);
        assert_eq!(not_after(&[0x30, 0x82, 0xff]), None);
        let mut der = certificate(2049, 12, 31);
        der.truncate(40);
        assert_eq!(not_after(&der), None);
    }
}
