//! AFL target: the cursor decoder behind its signature. The input is taken as a token's payload
//! bytes and signed with the harness's secret (a fuzzer cannot forge HMACs, and the decoder
//! behind the check is the part that parses); the first byte picks the position type, as the
//! routes open them. A token must open to a position or be refused: a panic is a crash. Raw
//! input is also tried as a whole token, unsigned.

use asof_cursor::CursorSigner;
use asof_engine::{Day, Lane, Position, SourceId};

fn main() {
    let signer = CursorSigner::new("fuzz-secret");
    afl::fuzz!(|data: &[u8]| {
        let Some((&which, body)) = data.split_first() else {
            return;
        };
        if let Ok(text) = std::str::from_utf8(data) {
            let _ = signer.open::<serde_json::Value>(text, "news", "f", "v");
        }
        let token = signer.sign_bytes(body);
        let _ = match which % 4 {
            0 => signer.open::<Position>(&token, "news", "f", "v").map(drop),
            1 => signer.open::<Position>(&token, "diff", "f", "v").map(drop),
            2 => signer
                .open::<(SourceId, Lane, Day)>(&token, "coverage", "f", "v")
                .map(drop),
            _ => signer
                .open::<String>(&token, "mcp.session", "", "mcp")
                .map(drop),
        };
    });
}
