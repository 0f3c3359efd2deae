//! TEMPORARY until the per-attempt stop lands.
use super::Found;
use crate::app::Error;
pub fn stop_attempt(_found: &Found, _stopped: bool) -> Result<(), Error> {
    Err(Error::invalid("stopping a run is not available yet"))
}
