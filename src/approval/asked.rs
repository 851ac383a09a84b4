//! A question handed to whoever answers it, with a deadline: every way an [`Asked`] can end
//! answers the asker (a decision, [`Asked::decline`], a drop, or the deadline). What the answer
//! becomes for codex is the codex layer's business: it hands over a [`Reply`] that builds it.

use std::time::Instant;

use tokio::sync::oneshot;

use super::question::{Decision, DecisionRecord, Input, Question};

/// Who answers the questions of one turn: the person behind the client connection that started
/// it (built by the MCP layer). It answers through the [`Asked`] and resolves to the record of
/// what was decided.
pub type Asker = std::sync::Arc<
    dyn Fn(Asked) -> std::pin::Pin<Box<dyn std::future::Future<Output = DecisionRecord> + Send>>
        + Send
        + Sync,
>;

/// What answers the asker with a decision (and a person's input) on the question asked: it
/// returns what the asker got, which is a decline when the decision cannot be given as it is
/// (an accept whose input does not fit the question), or when nobody waits for it any more.
pub type Reply = Box<dyn FnOnce(&Question, Decision, Option<Input>) -> Decision + Send>;

/// A question handed to an answerer. Answer it before [`Asked::deadline`]; after it, or if this
/// is dropped, the asker gets the decline.
pub struct Asked {
    pub question: Question,
    deadline: Instant,
    reply: Reply,
}

impl std::fmt::Debug for Asked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asked")
            .field("question", &self.question)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl Asked {
    /// Hand `question` over; `reply` answers the asker (dropped unanswered, the asker's side
    /// takes it as a decline).
    pub fn new(question: Question, deadline: Instant, reply: Reply) -> Self {
        Asked {
            question,
            deadline,
            reply,
        }
    }

    /// When the asker gets the decline if no answer came.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Answer with `decision` (and `input` for a question that needs it). Returns what was
    /// decided: `Decline` also when the deadline passed first and the asker already got it, or
    /// when the accept could not be given as it is.
    pub fn answer(self, decision: Decision, input: Option<Input>) -> Decision {
        if Instant::now() >= self.deadline {
            return Decision::Decline;
        }
        (self.reply)(&self.question, decision, input)
    }

    /// Decline now.
    pub fn decline(self) {
        let _ = self.answer(Decision::Decline, None);
    }

    /// A copy of the question for an answerer, and this one held back: the answer the copy
    /// gets reaches the asker only through [`Held::forward`], after whatever checks the holder
    /// makes. Same deadline: past it, the asker gets the decline whatever comes.
    pub fn interpose(self) -> (Asked, Held) {
        let (tx, rx) = oneshot::channel();
        let copy = Asked::new(
            self.question.clone(),
            self.deadline,
            Box::new(move |_, decision, input| match tx.send((decision, input)) {
                Ok(()) => decision,
                Err(_) => Decision::Decline,
            }),
        );
        (
            copy,
            Held {
                original: self,
                answered: rx,
            },
        )
    }
}

/// A decision given to the copy of a held question, with the person's input.
pub type Given = (Decision, Option<Input>);

/// A question held back by [`Asked::interpose`]: dropped, the asker gets the decline.
#[derive(Debug)]
pub struct Held {
    original: Asked,
    answered: oneshot::Receiver<Given>,
}

impl Held {
    /// The question codex asked.
    pub fn asked(&self) -> &Asked {
        &self.original
    }

    /// What the copy was given, once given (`None`: the answerer dropped it unanswered).
    pub async fn answer(&mut self) -> Option<Given> {
        (&mut self.answered).await.ok()
    }

    /// Give the asker `given`. Returns what the asker got.
    pub fn forward(self, (decision, input): Given) -> Decision {
        self.original.answer(decision, input)
    }

    /// Give the asker the decline.
    pub fn decline(self) {
        self.original.decline();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    fn question() -> Question {
        Question::UserInput { questions: vec![] }
    }

    /// An [`Asked`] whose reply keeps what it was given; the asker takes an accept as given.
    fn asked(deadline: Instant) -> (Asked, Arc<Mutex<Vec<Decision>>>) {
        let got = Arc::new(Mutex::new(Vec::new()));
        let seen = got.clone();
        let reply: Reply = Box::new(move |_, d, _| {
            seen.lock().unwrap().push(d);
            d
        });
        (Asked::new(question(), deadline, reply), got)
    }

    #[test]
    fn an_answer_reaches_the_asker_once_and_never_after_the_deadline() {
        let later = Instant::now() + Duration::from_secs(60);
        let (a, got) = asked(later);
        assert_eq!(a.answer(Decision::AcceptOnce, None), Decision::AcceptOnce);
        assert_eq!(*got.lock().unwrap(), [Decision::AcceptOnce]);
        let (a, got) = asked(Instant::now());
        assert_eq!(a.answer(Decision::AcceptOnce, None), Decision::Decline);
        assert!(
            got.lock().unwrap().is_empty(),
            "past the deadline nothing is sent"
        );
    }

    #[tokio::test]
    async fn a_held_question_reaches_the_asker_only_when_forwarded() {
        let later = Instant::now() + Duration::from_secs(60);
        let (a, got) = asked(later);
        let (copy, mut held) = a.interpose();
        assert_eq!(
            copy.answer(Decision::AcceptOnce, None),
            Decision::AcceptOnce
        );
        assert!(got.lock().unwrap().is_empty(), "held back");
        let given = held.answer().await.unwrap();
        assert_eq!(given.0, Decision::AcceptOnce);
        assert_eq!(held.forward(given), Decision::AcceptOnce);
        assert_eq!(*got.lock().unwrap(), [Decision::AcceptOnce]);

        // the holder's decline wins over the copy's accept; a dropped copy gives nothing
        let (a, got) = asked(later);
        let (copy, mut held) = a.interpose();
        copy.answer(Decision::AcceptOnce, None);
        assert!(held.answer().await.is_some());
        held.decline();
        assert_eq!(*got.lock().unwrap(), [Decision::Decline]);
        let (a, _) = asked(later);
        let (copy, mut held) = a.interpose();
        drop(copy);
        assert!(held.answer().await.is_none());
    }
}
