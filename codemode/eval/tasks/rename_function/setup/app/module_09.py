from lib.util import fetch_data


def job_9():
    first = fetch_data('a9')
    return first + fetch_data('b9')
