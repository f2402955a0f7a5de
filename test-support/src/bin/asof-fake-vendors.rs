//! The two fake market-data vendors (`asof_test_support::vendors`) as a process, for the
//! contract run on a fully configured server: prints `listening <vendor A url> <vendor B url>`
//! once both accept connections, then serves until killed. Both accept
//! `asof_test_support::vendors::VENDOR_KEY`.

#[tokio::main(flavor = "current_thread")]
async fn main() {
    use asof_test_support::vendors::FakeVendor;
    let a = FakeVendor::start_a().await;
    let b = FakeVendor::start_b().await;
    println!("listening {} {}", a.url, b.url);
    // Keep serving until the test kills the process.
    std::future::pending::<()>().await;
}
