//! Moving a watch back from a fallback upstream to an earlier one that returned
//! (`upstream::failover`): the new watch is taken only once that upstream shows it has history
//! from the watch's RV (see `Reflector::stream`).

use std::time::Duration;

use bytes::Bytes;

use crate::upstream::{compressed, ResponseBody, ServedBy};
use crate::wire::list_watch;
use crate::wire::proto::WatchFrameDecoder;
use crate::wire::resource::Encoding;

/// A watch on a fallback upstream tries to move back this often while the returned upstream
/// has no history from its RV, for at most [`MOVE_GIVE_UP`] (then it resumes there, and
/// relists if it must): well within the 30 s in which node tiers are back on a returned pool.
pub(super) const MOVE_RETRY: Duration = Duration::from_secs(3);
pub(super) const MOVE_GIVE_UP: Duration = Duration::from_secs(12);
/// How long a moved-to watch may stay silent before it is taken as having history (an
/// upstream without it answers at once with an ERROR event).
const MOVE_FIRST_FRAME: Duration = Duration::from_secs(1);

/// Whether a watch just opened on a returned upstream has history from its RV: its first
/// frame is not an ERROR (a 410: that upstream's caches started after the RV), or none comes
/// within [`MOVE_FIRST_FRAME`] (a quiet resource). `Some` with the bytes read of it, if any;
/// `None` if it has no history, ended or failed.
pub(super) async fn has_history(
    body: &mut compressed::Chunks,
    encoding: Encoding,
    max_frame: usize,
) -> Option<Option<Bytes>> {
    match tokio::time::timeout(MOVE_FIRST_FRAME, body.next()).await {
        Err(_) => Some(None),
        Ok(Some(Ok(data))) if !starts_with_error(encoding, &data, max_frame) => Some(Some(data)),
        Ok(_) => None,
    }
}

/// Whether a stream's first bytes hold a whole ERROR event.
fn starts_with_error(encoding: Encoding, data: &[u8], max_frame: usize) -> bool {
    let first = match encoding {
        Encoding::Json => data
            .split(|b| *b == b'\n')
            .next()
            .filter(|_| data.contains(&b'\n'))
            .map(Bytes::copy_from_slice),
        Encoding::Protobuf => {
            let mut frames = WatchFrameDecoder::new(max_frame);
            frames.push(data);
            frames.next_frame().ok().flatten().map(|f| Bytes::copy_from_slice(&f))
        }
    };
    first
        .and_then(|f| list_watch::parse_watch_event(encoding, &f).ok())
        .is_some_and(|e| e.event_type == "ERROR")
}

/// The upstream that answered (`upstream::failover`): 0 is the most preferred.
pub(super) fn served_by(resp: &http::Response<ResponseBody>) -> usize {
    resp.extensions().get::<ServedBy>().map_or(0, |s| s.0)
}
