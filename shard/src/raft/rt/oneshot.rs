//! openraft's oneshot channel: the `futures` oneshot, which needs no
//! runtime and whose receiver fails with `Canceled` once the sender drops.

use futures::channel::oneshot;
use openraft::async_runtime::{Oneshot, OneshotSender};

/// The oneshot family for [`super::GlommioRt`].
#[derive(Debug)]
pub struct LocalOneshot;

/// The sending half.
#[derive(Debug)]
pub struct OneshotTx<T>(oneshot::Sender<T>);

impl Oneshot for LocalOneshot {
    type Sender<T> = OneshotTx<T>;
    type Receiver<T> = oneshot::Receiver<T>;
    type ReceiverError = oneshot::Canceled;

    fn channel<T>() -> (Self::Sender<T>, Self::Receiver<T>) {
        let (tx, rx) = oneshot::channel();
        (OneshotTx(tx), rx)
    }
}

impl<T> OneshotSender<T> for OneshotTx<T> {
    fn send(self, value: T) -> Result<(), T> {
        self.0.send(value)
    }
}
