print("formwall-bench")
