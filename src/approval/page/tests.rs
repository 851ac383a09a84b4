//! The table's rules: the one-time page, the cookie, the token, expiry and closing.

use super::table::*;
use super::*;

fn question() -> PageQuestion {
    PageQuestion {
        title: "Codex asks to run a command".into(),
        fields: vec![("Command".into(), "touch x".into())],
        grants: "Approving allows this one request, once.".into(),
    }
}

/// A table with one open question `id`, expiring in a minute; its receiver.
/// The code of [`table_with`]'s question.
const CODE: &str = "042917";

fn table_with(id: &str) -> (Table, oneshot::Receiver<PageDecision>, String) {
    let mut t = Table::default();
    let (tx, rx) = oneshot::channel();
    let token = secret();
    t.open = 1;
    t.entries.insert(
        id.into(),
        Entry {
            question: Some(Arc::new(question())),
            bytes: question().bytes(),
            code: CODE.into(),
            wrong_codes: 0,
            token: token.clone(),
            cookie: None,
            state: State::Open,
            expires: Instant::now() + Duration::from_secs(60),
            decided: Some(tx),
            ended: Arc::new(Notify::new()),
            ended_at: None,
            turn_ended: false,
        },
    );
    t.open_bytes = question().bytes();
    (t, rx, token)
}

/// The secret of a `Set-Cookie` value.
fn secret_of(set_cookie: &str) -> String {
    let (pair, attrs) = set_cookie.split_once(';').unwrap();
    assert_eq!(
        attrs.trim(),
        "Path=/q/abc; HttpOnly; SameSite=Strict",
        "{set_cookie}"
    );
    pair.split_once('=').unwrap().1.to_owned()
}

fn status(a: &PageReply) -> u16 {
    match a {
        PageReply::Page { .. } => 200,
        PageReply::Notice(s, ..) => *s,
        PageReply::SeeOther(_) => 303,
    }
}

/// Open the page once and return the cookie's secret.
fn first_get(t: &mut Table) -> String {
    match t.get("abc", None) {
        PageReply::Page {
            html,
            cookie: Some(c),
        } => {
            assert!(html.contains("touch x"));
            secret_of(&c)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_page_opens_once_and_again_only_with_its_cookie() {
    let (mut t, _rx, _) = table_with("abc");
    let c = first_get(&mut t);
    assert_eq!(c.len(), 64);
    // a refresh in the same browser
    assert!(matches!(
        t.get("abc", Some(&c)),
        PageReply::Page { cookie: None, .. }
    ));
    // another browser, or the cookie forged
    for other in [None, Some("x"), Some(&c[1..])] {
        let a = t.get("abc", other);
        assert_eq!(status(&a), 410, "{other:?}");
        assert!(format!("{a:?}").contains("was opened already"));
    }
    assert_eq!(status(&t.get("abd", None)), 404);
}

#[test]
fn a_wrong_code_goes_back_to_the_question_with_the_tries_left_and_the_third_declines() {
    let (mut t, mut rx, token) = table_with("abc");
    let c = first_get(&mut t);
    let page = |t: &mut Table| match t.get("abc", Some(&c)) {
        PageReply::Page { html, .. } => html,
        other => panic!("{other:?}"),
    };
    assert!(!page(&mut t).contains("id=\"wrong\""));
    for (tried, left) in [(1, "2 tries left"), (2, "1 try left")] {
        let r = t.decide(
            "abc",
            Some(&c),
            Some(&token),
            Some("approve"),
            Some("999999"),
        );
        assert_eq!(r, PageReply::SeeOther("/q/abc".into()), "{tried}");
        assert!(rx.try_recv().is_err());
        let html = page(&mut t);
        assert!(html.contains("Wrong code") && html.contains(left), "{html}");
        assert!(html.contains("id=\"approve\""));
    }
    // the third wrong code (none at all counts too) declines the question
    let r = t.decide("abc", Some(&c), Some(&token), Some("approve"), None);
    assert_eq!(r, PageReply::SeeOther("/q/abc".into()));
    assert_eq!(rx.try_recv(), Ok(PageDecision::Deny));
    assert_eq!(t.entries["abc"].state, State::WrongCodes);
    assert_eq!((t.open, t.open_bytes), (0, 0));
    // the page now says so, with no Approve; the right code is refused with that reason
    let after = t.get("abc", Some(&c));
    assert!(matches!(after, PageReply::Notice(410, ..)), "{after:?}");
    assert!(
        format!("{after:?}").contains("Three wrong codes"),
        "{after:?}"
    );
    let r = t.decide("abc", Some(&c), Some(&token), Some("approve"), Some(CODE));
    assert_eq!(status(&r), 409);
    assert!(format!("{r:?}").contains("Three wrong codes"), "{r:?}");
}

#[test]
fn the_token_decides_once_and_every_refusal_changes_nothing() {
    let (mut t, mut rx, token) = table_with("abc");
    // before the page was opened no cookie can match
    assert_eq!(
        status(&t.decide("abc", None, Some(&token), Some("approve"), Some(CODE))),
        403
    );
    let c = first_get(&mut t);
    let refusals = [
        (None, Some(token.as_str()), Some("approve"), 403),
        (Some("forged"), Some(token.as_str()), Some("approve"), 403),
        (Some(c.as_str()), None, Some("approve"), 400),
        (Some(c.as_str()), Some("wrong"), Some("approve"), 403),
        (Some(c.as_str()), Some(&token[..63]), Some("approve"), 403),
        (Some(c.as_str()), Some(token.as_str()), Some("yes"), 400),
        (Some(c.as_str()), Some(token.as_str()), None, 400),
    ];
    for (cookie, tok, d, want) in refusals {
        assert_eq!(
            status(&t.decide("abc", cookie, tok, d, Some(CODE))),
            want,
            "{cookie:?} {tok:?} {d:?}"
        );
        assert_eq!(t.entries["abc"].state, State::Open);
        assert!(rx.try_recv().is_err());
    }
    // Approve needs the code the host shows
    for wrong in [None, Some("000000")] {
        let r = t.decide("abc", Some(&c), Some(&token), Some("approve"), wrong);
        assert_eq!(r, PageReply::SeeOther("/q/abc".into()), "{wrong:?}");
        assert!(rx.try_recv().is_err());
    }
    let a = t.decide("abc", Some(&c), Some(&token), Some("approve"), Some(CODE));
    assert!(
        format!("{a:?}").contains("You approved this request on this page"),
        "{a:?}"
    );
    assert_eq!(rx.try_recv(), Ok(PageDecision::Approve));
    assert_eq!(t.open, 0);
    assert_eq!(t.open_bytes, 0);
    // reused: the question is decided, and says so
    let again = t.decide("abc", Some(&c), Some(&token), Some("deny"), Some(CODE));
    assert_eq!(status(&again), 409);
    assert!(format!("{again:?}").contains("approved this request on this page"));
    assert_eq!(
        t.entries["abc"].state,
        State::Decided(PageDecision::Approve)
    );
    let later = t.get("abc", Some(&c));
    assert_eq!(status(&later), 410);
    assert!(format!("{later:?}").contains("approved this request on this page"));
}

#[test]
fn an_expired_or_closed_question_decides_nothing_and_says_how_it_ended() {
    let (mut t, mut rx, token) = table_with("abc");
    let c = first_get(&mut t);
    t.entries.get_mut("abc").unwrap().expires = Instant::now();
    let a = t.decide("abc", Some(&c), Some(&token), Some("approve"), Some(CODE));
    assert_eq!(status(&a), 410);
    assert!(format!("{a:?}").contains("expired"));
    assert!(rx.try_recv().is_err());
    assert!(t.entries["abc"].question.is_none());

    for (why, says) in [
        (Closed::DeclinedInHost, "declined in the host"),
        (Closed::TimedOut, "approval timeout"),
        (
            Closed::Withdrawn,
            "the turn or the connection that asked it ended",
        ),
    ] {
        let (mut t, _rx, token) = table_with("abc");
        let c = first_get(&mut t);
        assert!(t.end("abc", State::Closed(why)));
        assert!(!t.end("abc", State::Expired), "ends once");
        for a in [
            t.get("abc", Some(&c)),
            t.decide("abc", Some(&c), Some(&token), Some("approve"), Some(CODE)),
        ] {
            assert_eq!(status(&a), 410);
            assert!(format!("{a:?}").contains(says), "{a:?}");
        }
    }
}

#[test]
fn the_oldest_ended_questions_are_forgotten_first() {
    let mut t = Table::default();
    for i in 0..MAX_ENDED + 3 {
        let (mut one, _rx, _) = table_with(&format!("{i:04}"));
        let id = format!("{i:04}");
        one.end(&id, State::Expired);
        let e = one.entries.remove(&id).unwrap();
        t.entries.insert(id, e);
        t.make_room();
    }
    assert!(t.entries.len() <= MAX_ENDED);
    assert!(!t.entries.contains_key("0000"));
    assert!(t.entries.contains_key(&format!("{:04}", MAX_ENDED + 2)));
}

#[test]
fn secrets_are_long_random_and_ids_are_logged_short() {
    let (a, b) = (secret(), secret());
    assert_ne!(a, b);
    assert_eq!(a.len(), 64);
    assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(short(&a).len(), 6);
}

#[tokio::test]
async fn open_refuses_too_large_expired_and_too_many() {
    let pages = Pages::new();
    let mut big = question();
    big.fields
        .push(("Change".into(), "x".repeat(MAX_QUESTION_BYTES)));
    let later = Instant::now() + Duration::from_secs(60);
    assert!(matches!(
        pages.open(big, later).await,
        Err(PageError::TooLarge { .. })
    ));
    assert!(matches!(
        pages.open(question(), Instant::now()).await,
        Err(PageError::Expired)
    ));
    let mut open = Vec::new();
    for _ in 0..MAX_OPEN {
        open.push(pages.open(question(), later).await.unwrap());
    }
    assert!(matches!(
        pages.open(question(), later).await,
        Err(PageError::Full)
    ));
    // a closed question gives its place back
    open.pop().unwrap().close(Closed::TimedOut);
    let page = pages.open(question(), later).await.unwrap();
    assert!(page.url.starts_with("http://127.0.0.1:"));
    assert_eq!(pages.shared.table().open, MAX_OPEN);
    drop(open);
    assert_eq!(pages.shared.table().open, 1);
}
