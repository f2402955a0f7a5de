//! The fake payment processor (`asof_test_support::processor`) as a process, for the Python
//! end-to-end billing test: prints `listening <url>` once it accepts connections, then serves
//! until killed.

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let fake = asof_test_support::processor::FakeProcessor::start().await;
    println!("listening {}", fake.url);
    // Keep serving until the test kills the process.
    std::future::pending::<()>().await;
}
