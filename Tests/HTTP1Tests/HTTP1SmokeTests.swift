import Testing
@testable import HTTP1
