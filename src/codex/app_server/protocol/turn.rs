//! Turns: [`TurnParams`] and the `turn/start` template (with the approval policy a turn may ask
//! under, and a one-shot call's `outputSchema`), `turn/steer`, `turn/interrupt` and the
//! `thread/backgroundTerminals/clean` that follows it, their results, and a turn as codex
//! reports it (its id and [`TurnStatus`]).

use crate::security::ids::ModelId;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::frame::{Method, ProtocolError, TurnRef, invalid, message, typed_ref};
use super::policy::{Approvals, Reviewer, SandboxPolicy, cwd_value, model_value};
use crate::plan::values::{ReasoningEffort, SandboxLevel};
use crate::security::ids::ThreadId;
use crate::security::prompt::Prompt;

/// A turn: the caller's text and the few typed values a turn may carry.
#[derive(Debug, Clone)]
pub struct TurnParams<'a> {
    pub thread: &'a ThreadId,
    /// Checked where the call was parsed (never empty, bounded).
    pub prompt: &'a Prompt,
    /// `None` is read-only, whatever the previous turn used.
    pub sandbox: Option<SandboxLevel>,
    /// A confined directory.
    pub cwd: &'a Path,
    pub model: Option<&'a ModelId>,
    pub effort: Option<ReasoningEffort>,
}

/// A turn's input: the caller's text, nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum UserInput {
    Text { text: String },
}

fn text_input(prompt: &Prompt) -> [UserInput; 1] {
    [UserInput::Text {
        text: (**prompt).to_owned(),
    }]
}

/// The params of `turn/start` ([`turn_start`], [`turn_start_with`],
/// [`turn_start_with_schema`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStart {
    thread_id: String,
    input: [UserInput; 1],
    sandbox_policy: SandboxPolicy,
    approval_policy: Approvals,
    approvals_reviewer: Reviewer,
    cwd: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    effort: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_schema: Option<Value>,
}

/// The `turn/start` result: the turn it started.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "WireStarted")]
pub struct StartedTurn {
    pub id: TurnRef,
}

#[derive(Deserialize)]
struct WireStarted {
    turn: WireTurn,
}

impl From<WireStarted> for StartedTurn {
    fn from(w: WireStarted) -> Self {
        StartedTurn { id: w.turn.id }
    }
}

message!(TurnStart, Method::TurnStart, StartedTurn);

/// `turn/start`. Always carries `sandboxPolicy`, `approvalPolicy: "never"`,
/// `approvalsReviewer: "user"` and `cwd`: every one of them is sticky on the thread.
pub fn turn_start(t: &TurnParams<'_>) -> Result<TurnStart, ProtocolError> {
    Ok(TurnStart {
        thread_id: t.thread.to_arg(),
        input: text_input(t.prompt),
        sandbox_policy: SandboxPolicy::of(t.sandbox.unwrap_or(SandboxLevel::ReadOnly)),
        approval_policy: Approvals::Never,
        approvals_reviewer: Reviewer::User,
        cwd: cwd_value(t.cwd)?,
        model: model_value(t.model),
        effort: t.effort.map(|e| e.as_str()),
        output_schema: None,
    })
}

/// [`turn_start`] with the approval policy `approvals` (every other key as there).
pub fn turn_start_with(
    t: &TurnParams<'_>,
    approvals: Approvals,
) -> Result<TurnStart, ProtocolError> {
    Ok(TurnStart {
        approval_policy: approvals,
        ..turn_start(t)?
    })
}

/// `turn/start` of a one-shot call: [`turn_start_with`] plus, for `structured`, the caller's
/// JSON Schema as `outputSchema` (both versions: it constrains this turn's final message only).
pub fn turn_start_with_schema(
    t: &TurnParams<'_>,
    approvals: Approvals,
    schema: Option<&Value>,
) -> Result<TurnStart, ProtocolError> {
    let mut o = turn_start_with(t, approvals)?;
    if let Some(schema) = schema {
        if !schema.is_object() {
            return Err(invalid("outputSchema", "must be a JSON object"));
        }
        o.output_schema = Some(schema.clone());
    }
    Ok(o)
}

/// A turn as the bridge reads it (`turn/start` result, `turn/started`, `turn/completed`).
#[derive(Deserialize)]
pub(super) struct WireTurn {
    pub(super) id: TurnRef,
    pub(super) status: TurnStatus,
    pub(super) error: Option<WireError>,
}

#[derive(Deserialize)]
pub(super) struct WireError {
    pub(super) message: String,
}

/// The state a turn ended in (a state of a later version reads as `Unknown`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TurnStatus {
    Completed,
    Interrupted,
    Failed,
    InProgress,
    #[serde(other)]
    Unknown,
}

/// Read a `turn/start` result: the id of the turn it started.
pub fn parse_turn_started(result: &Value) -> Result<TurnRef, ProtocolError> {
    typed_ref::<StartedTurn>("turn/start result", result).map(|s| s.id)
}

/// An empty result (`turn/interrupt`, `thread/backgroundTerminals/clean`): an object, its keys
/// (none on both versions) ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Empty {}

/// The params of `turn/interrupt` ([`turn_interrupt`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnInterrupt {
    thread_id: String,
    turn_id: String,
}

message!(TurnInterrupt, Method::TurnInterrupt, Empty);

/// `turn/interrupt`. It ends the turn (`interrupted`) in a few ms but leaves a running command
/// alive: follow it with [`clean_background_terminals`].
pub fn turn_interrupt(thread: &ThreadId, turn: &TurnRef) -> TurnInterrupt {
    TurnInterrupt {
        thread_id: thread.to_arg(),
        turn_id: turn.as_str().to_owned(),
    }
}

/// The params of `thread/backgroundTerminals/clean` ([`clean_background_terminals`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanBackgroundTerminals {
    thread_id: String,
}

message!(
    CleanBackgroundTerminals,
    Method::CleanBackgroundTerminals,
    Empty
);

/// `thread/backgroundTerminals/clean`: kills the commands the thread's turns left running.
pub fn clean_background_terminals(thread: &ThreadId) -> CleanBackgroundTerminals {
    CleanBackgroundTerminals {
        thread_id: thread.to_arg(),
    }
}

/// The params of `turn/steer` ([`turn_steer`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnSteer {
    thread_id: String,
    expected_turn_id: String,
    input: [UserInput; 1],
}

/// The `turn/steer` result: the turn the input joined.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Steered {
    pub turn_id: TurnRef,
}

message!(TurnSteer, Method::TurnSteer, Steered);

/// `turn/steer`: `text` joins the running turn `turn` of `thread` (codex refuses it when that
/// turn is not the one running). Nothing else: no sandbox, policy or cwd travels with a steer.
pub fn turn_steer(
    thread: &ThreadId,
    turn: &TurnRef,
    text: &Prompt,
) -> Result<TurnSteer, ProtocolError> {
    Ok(TurnSteer {
        thread_id: thread.to_arg(),
        expected_turn_id: turn.as_str().to_owned(),
        input: text_input(text),
    })
}

/// Read a `turn/steer` result: the turn the input joined.
pub fn parse_steered(result: &Value) -> Result<TurnRef, ProtocolError> {
    typed_ref::<Steered>("turn/steer result", result).map(|s| s.turn_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codex::app_server::protocol::fixtures::{THREAD, TURN, keys, line, text, thread};
    use crate::codex::app_server::protocol::{
        EffectivePolicy, Message, ReportedSandbox, parse_unsubscribed, thread_fork, thread_start,
        thread_unsubscribe,
    };
    use serde_json::json;

    #[test]
    fn every_turn_carries_its_sandbox_approval_reviewer_and_cwd() {
        let t = thread();
        let base = TurnParams {
            thread: &t,
            prompt: &text("-cmcp_servers={evil={command=\"touch\"}}"),
            sandbox: None,
            cwd: Path::new("/w/repo"),
            model: None,
            effort: None,
        };
        let o = turn_start(&base).unwrap();
        assert_eq!(
            line(&o, 22),
            json!({"method": "turn/start", "id": 22, "params": {
                "threadId": THREAD,
                "input": [{"type": "text", "text": "-cmcp_servers={evil={command=\"touch\"}}"}],
                "sandboxPolicy": {"type": "readOnly"}, "approvalPolicy": "never",
                "approvalsReviewer": "user", "cwd": "/w/repo"}})
        );
        let model = ModelId::parse("model", "m").unwrap();
        for (level, want) in [
            (SandboxLevel::ReadOnly, json!({"type": "readOnly"})),
            (
                SandboxLevel::WorkspaceWrite,
                json!({"type": "workspaceWrite", "writableRoots": [], "networkAccess": false}),
            ),
            (
                SandboxLevel::DangerFullAccess,
                json!({"type": "dangerFullAccess"}),
            ),
        ] {
            let o = turn_start(&TurnParams {
                sandbox: Some(level),
                model: Some(&model),
                effort: Some(ReasoningEffort::High),
                ..base.clone()
            })
            .unwrap();
            let p = o.params().unwrap();
            assert_eq!(p["sandboxPolicy"], want);
            assert_eq!(
                (p["model"].as_str(), p["effort"].as_str()),
                (Some("m"), Some("high"))
            );
            for k in ["approvalPolicy", "approvalsReviewer", "cwd"] {
                assert!(p.get(k).is_some(), "{k}");
            }
        }
    }

    #[test]
    fn bad_values_are_refused_with_their_field() {
        let t = thread();
        let turn = |prompt: &str, cwd, model| {
            turn_start(&TurnParams {
                thread: &t,
                prompt: &text(prompt),
                sandbox: None,
                cwd: Path::new(cwd),
                model,
                effort: None,
            })
        };
        fn field<M: std::fmt::Debug>(r: Result<M, ProtocolError>) -> &'static str {
            match r {
                Err(ProtocolError::Invalid { field, .. }) => field,
                other => panic!("{other:?}"),
            }
        }
        // an empty prompt is no `Prompt`: none reaches a template
        assert_eq!(
            Prompt::parse("prompt", " \n".into()).unwrap_err().field,
            "prompt"
        );
        assert_eq!(field(turn("x", "relative", None)), "cwd");
        // nor is an empty or multi-line model id a `ModelId`
        assert_eq!(ModelId::parse("model", "").unwrap_err().field, "model");
        assert_eq!(ModelId::parse("model", "a\nb").unwrap_err().field, "model");
        assert_eq!(field(thread_start(Path::new("w"), None, false)), "cwd");
        for bad in [
            "",
            "x",
            "01a22759-e393-7f71-bea4-35a12106bc1",
            "01a22759/e393-7f71-bea4-35a12106bc11",
        ] {
            assert!(ThreadId::parse(bad).is_err(), "{bad}");
            assert!(TurnRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_one_shot_adds_only_its_schema_and_unsubscribe_carries_only_the_thread() {
        let t = thread();
        let params = TurnParams {
            thread: &t,
            prompt: &text("x"),
            sandbox: None,
            cwd: Path::new("/w"),
            model: None,
            effort: None,
        };
        let plain = turn_start_with(&params, Approvals::Never).unwrap();
        let schema = json!({"type": "object"});
        let with = turn_start_with_schema(&params, Approvals::Never, Some(&schema)).unwrap();
        let mut expected = keys(&plain);
        expected.insert("outputSchema".into());
        assert_eq!(keys(&with), expected);
        assert_eq!(with.params().unwrap()["outputSchema"], schema);
        assert_eq!(
            turn_start_with_schema(&params, Approvals::Never, None).unwrap(),
            plain
        );
        assert!(matches!(
            turn_start_with_schema(&params, Approvals::Never, Some(&json!("x"))),
            Err(ProtocolError::Invalid {
                field: "outputSchema",
                ..
            })
        ));
        let un = thread_unsubscribe(&t);
        assert_eq!(
            line(&un, 7),
            json!({"method": "thread/unsubscribe", "id": 7, "params": {"threadId": THREAD}})
        );
        assert_eq!(
            parse_unsubscribed(&json!({"status": "unsubscribed"})),
            Ok(true)
        );
        assert_eq!(
            parse_unsubscribed(&json!({"status": "notLoaded"})),
            Ok(true)
        );
        assert_eq!(
            parse_unsubscribed(&json!({"status": "notSubscribed"})),
            Ok(false)
        );
        assert!(parse_unsubscribed(&json!({})).is_err());
    }

    #[test]
    fn fork_and_steer_are_fixed_templates_and_a_turn_may_ask_only_on_request() {
        let t = thread();
        let turn = TurnRef::parse(TURN).unwrap();
        let fork = thread_fork(&t, Path::new("/w"), None).unwrap();
        assert_eq!(
            line(&fork, 5),
            json!({"method": "thread/fork", "id": 5, "params": {"threadId": THREAD, "cwd": "/w",
                "sandbox": "read-only", "approvalPolicy": "never", "approvalsReviewer": "user"}})
        );
        let steer = turn_steer(&t, &turn, &text("also check b")).unwrap();
        assert_eq!(
            line(&steer, 6),
            json!({"method": "turn/steer", "id": 6, "params": {"threadId": THREAD,
                "expectedTurnId": TURN, "input": [{"type": "text", "text": "also check b"}]}})
        );
        assert!(Prompt::parse("prompt", " ".into()).is_err());
        assert_eq!(parse_steered(&json!({"turnId": TURN})).unwrap(), turn);
        let base = TurnParams {
            thread: &t,
            prompt: &text("x"),
            sandbox: None,
            cwd: Path::new("/w"),
            model: None,
            effort: None,
        };
        let asking = turn_start_with(&base, Approvals::OnRequest).unwrap();
        let mut plain = turn_start(&base).unwrap().params().unwrap().clone();
        plain["approvalPolicy"] = json!("on-request");
        assert_eq!(asking.params().unwrap(), plain);
        assert_eq!(
            turn_start_with(&base, Approvals::Never).unwrap(),
            turn_start(&base).unwrap()
        );
        let policy = EffectivePolicy {
            sandbox: ReportedSandbox::ReadOnly { network: false },
            approval_policy: "on-request".into(),
            approvals_reviewer: "user".into(),
            cwd: "/w".into(),
        };
        let ro = SandboxLevel::ReadOnly;
        assert_eq!(
            policy.check_with(ro, Path::new("/w"), Approvals::OnRequest),
            Ok(())
        );
        assert!(
            policy
                .check_with(ro, Path::new("/w"), Approvals::Never)
                .is_err()
        );
        assert!(policy.check(ro, Path::new("/w")).is_err());
        let reviewer = EffectivePolicy {
            approvals_reviewer: "auto_review".into(),
            ..policy
        };
        let err = reviewer
            .check_with(ro, Path::new("/w"), Approvals::OnRequest)
            .unwrap_err()
            .0;
        assert!(err.contains("reviewer"), "{err}");
    }
}
