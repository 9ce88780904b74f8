import Glibc
import XCTest
@testable import KeychainCrypto

/// Parallel.map and Parallel.start: results in order, every item once, work on more than one
/// thread when there is enough of it and more than one processor.
final class ParallelTests: XCTestCase {
    /// The threads that ran some work, recorded under a lock.
    private final class Threads: @unchecked Sendable {
        private let lock = PThreadMutex(.plain)
        private var seen: Set<UInt> = []
        func record() { lock.withLock { _ = seen.insert(UInt(bitPattern: Int(pthread_self()))) } }
        var count: Int { lock.withLock { seen.count } }
    }

    func test_map_keeps_the_order_and_runs_each_item_once_on_several_threads() {
        let threads = Threads()
        let counter = PThreadMutex(.plain)
        var runs = 0
        let items = Array(0..<5000)
        let squares = Parallel.map(items) { item -> Int in
            threads.record()
            counter.withLock { runs += 1 }
            // Enough work per item that the other thread gets its share.
            var spin = 0
            for step in 0..<200 { spin &+= step &* item }
            return spin == Int.min ? -1 : item * item
        }
        XCTAssertEqual(squares, items.map { $0 * $0 })
        XCTAssertEqual(runs, items.count)
        if Parallel.processors > 1 {
            XCTAssertGreaterThan(threads.count, 1, "5,000 items on \(Parallel.processors) processors ran on one thread")
        }
    }

    func test_few_items_stay_on_the_callers_thread_and_none_give_none() {
        let me = UInt(bitPattern: Int(pthread_self()))
        let ran = Parallel.map(Array(0..<10)) { _ in UInt(bitPattern: Int(pthread_self())) }
        XCTAssertEqual(Set(ran), [me])
        XCTAssertEqual(Parallel.map([Int]()) { $0 }, [])
    }

    func test_map_carries_results_that_own_memory() {
        let words = (0..<3000).map { "item \($0)" }
        let result = Parallel.map(words) { word in SecureBytes(Array(word.utf8)) }
        XCTAssertEqual(result.map { String(decoding: $0.bytes, as: UTF8.self) }, words)
    }

    func test_background_work_is_joined_with_its_result_once() {
        let caller = UInt(bitPattern: Int(pthread_self()))
        let task = Parallel.start { () -> (UInt, Int) in (UInt(bitPattern: Int(pthread_self())), (1...100).reduce(0, +)) }
        let result = task.join()
        XCTAssertEqual(result?.1, 5050)
        XCTAssertNotEqual(result?.0, caller, "ran on a thread of its own")
        XCTAssertNil(task.join(), "a second join has nothing left")
    }
}
